// The built-in layers. Each holds its configuration, pointers to its parameters
// in the ParameterStore and any scratch it reuses across steps; the compute is
// the device-neutral ops of ops/ (one family per folder, ops/exec.h).
#pragma once

#include <memory>

#include "nn/module.h"
#include "ops/conv/conv2d.h"

namespace lockstep {

// Every layer runs where its input tensor lives: the ops pick the CPU kernels,
// or for tensors on a GPU the CUDA/cuBLAS/cuDNN ones on the context's stream
// (ForwardContext::gpu, BackwardContext::gpu). Same semantics either way.

// y = x W^T + b.   x [B, in]   W [out, in]   b [out]   y [B, out]
// Over the last dimension of any rank >= 2: x [B, T, in] -> y [B, T, out] is
// the same product on the B*T rows (a transformer's projections).
class Linear final : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias = true);
  std::string describe() const override;
  Shape output_shape(const Shape& in) const override;
  void declare(ParameterStore& store, const std::string& prefix) override;
  void init(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) override;
  HeldMemory held_memory() const override { return {0, 0, static_cast<int64_t>(w16_.nbytes())}; }
  bool has_parameters() const override { return true; }
  std::vector<const Parameter*> parameters() const override { return b_ ? std::vector<const Parameter*>{w_, b_} : std::vector<const Parameter*>{w_}; }
  int64_t forward_flops(const Shape& in) const override { return 2 * (in.numel() / in_) * in_ * out_; }
  bool fuse_relu(bool on) override { return relu_ = on; }
  bool backward_reads_output() const override { return relu_; }
  // init() draws the weight from normal(0, std) and zeroes the bias (GPT-2's
  // initialisation) instead of PyTorch's uniform(+-1/sqrt(in)) for both.
  Linear& normal_init(float std) {
    normal_std_ = std;
    return *this;
  }

 private:
  int64_t in_, out_;
  bool bias_;
  float normal_std_ = 0.f;  // > 0: normal_init
  bool relu_ = false;  // fused ReLU on the output
  Parameter* w_ = nullptr;
  Parameter* b_ = nullptr;
  Tensor w16_;  // 16-bit inputs (mixed precision): the weight rounded to their type by each forward
};

// x [N, C, H, W]   W [OC, C, K, K]   b [OC]   y [N, OC, OH, OW]
// (activations in the layout set_layout gave; W keeps this order in both)
class Conv2d final : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride = 1, int64_t padding = 0,
         bool bias = true);
  std::string describe() const override;
  Shape output_shape(const Shape& in) const override;
  void declare(ParameterStore& store, const std::string& prefix) override;
  void init(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) override;
  // The 16-bit weight and the Winograd filter transform (the per-thread buffers are the model's).
  HeldMemory held_memory() const override { return {0, 0, op_.held_bytes()}; }
  bool has_parameters() const override { return true; }
  std::vector<const Parameter*> parameters() const override { return b_ ? std::vector<const Parameter*>{w_, b_} : std::vector<const Parameter*>{w_}; }
  int64_t forward_flops(const Shape& in) const override;
  bool fuse_relu(bool on) override { return relu_ = on; }
  bool backward_reads_output() const override { return relu_; }
  // Forces an algorithm (--conv-algorithm, tests); Auto picks per shape. NHWC
  // on the CPU has one algorithm (im2col + GEMM) and ignores it.
  void set_conv_algorithm(ops::ConvAlgo algo) override { op_.set_algorithm(algo); }
  void set_layout(Layout layout) override { op_.set_layout(layout); }
  // The CPU kernels' per-thread buffers become the model's (its own `shared`
  // buffer, the Winograd filter transform, stays).
  void share_scratch(const std::shared_ptr<SharedScratch>& scratch) override;

 private:
  int64_t in_c_, out_c_, k_, stride_, pad_;
  bool bias_;
  bool relu_ = false;  // fused ReLU on the output
  Parameter* w_ = nullptr;
  Parameter* b_ = nullptr;
  ops::Conv2dOp op_;  // the kernels' state: CPU workspace and algorithm, GPU descriptors, 16-bit weight
};

enum class PoolKind { Max, Avg };

// x [N, C, H, W] -> y [N, C, OH, OW]; floor mode; padding for max pooling
// only (padded positions never win).
class Pool2d final : public Module {
 public:
  Pool2d(PoolKind kind, int64_t kernel, int64_t stride = 0, int64_t padding = 0);  // stride 0 = kernel
  std::string describe() const override;
  Shape output_shape(const Shape& in) const override;
  void forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) override;
  HeldMemory held_memory() const override { return {0, 0, static_cast<int64_t>(argmax_.nbytes())}; }
  void set_layout(Layout layout) override { layout_ = layout; }

 private:
  PoolKind kind_;
  int64_t k_, stride_, pad_;
  std::string name_;  // describe(), for the ops' messages (formatted once)
  Layout layout_ = Layout::NCHW;
  Tensor argmax_;  // int32, per output element (max pooling)
};

// x [N, C, H, W] -> y [N, C]: the mean of each channel's plane (ResNets' head).
class GlobalAvgPool final : public Module {
 public:
  std::string describe() const override { return "GlobalAvgPool()"; }
  Shape output_shape(const Shape& in) const override;
  void forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) override;
  void set_layout(Layout layout) override { layout_ = layout; }

 private:
  Layout layout_ = Layout::NCHW;
};

class ReLU final : public Module {
 public:
  std::string describe() const override { return "ReLU()"; }
  Shape output_shape(const Shape& in) const override { return in; }
  void forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) override;
  Aliasing aliasing() const override { return Aliasing::InPlace; }
  bool backward_reads_output() const override { return true; }
  bool is_relu() const override { return true; }
  int64_t forward_traffic(const Shape&) const override { return 0; }  // fusable into the layer before
};

// GELU with the tanh approximation (GPT-2's; PyTorch's nn.GELU(approximate="tanh")):
// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Backward reads its input.
class GELU final : public Module {
 public:
  std::string describe() const override { return "GELU(approximate='tanh')"; }
  Shape output_shape(const Shape& in) const override { return in; }
  void forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) override;
};

// Inverted dropout with masks drawn from (seed, layer, step, global sample index,
// logical element index): the same masks in either layout.
class Dropout final : public Module {
 public:
  explicit Dropout(float p);
  std::string describe() const override;
  Shape output_shape(const Shape& in) const override { return in; }
  void declare(ParameterStore& store, const std::string& prefix) override;
  void forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) override;
  HeldMemory held_memory() const override { return {0, 0, static_cast<int64_t>(mask_.nbytes())}; }
  Aliasing aliasing() const override { return Aliasing::InPlace; }
  void set_layout(Layout layout) override { layout_ = layout; }
  int64_t forward_traffic(const Shape&) const override { return 0; }  // fusable into the layer before

 private:
  float p_;
  Layout layout_ = Layout::NCHW;
  uint64_t stream_ = 0;  // from the layer's name, so masks differ between layers
  bool active_ = false;  // last forward dropped anything
  Tensor mask_;          // uint8 per element
};

// [N, ...] -> [N, prod(...)] in logical (C, H, W) order, as PyTorch's flatten:
// a view that moves no data, except for a 4-D NHWC input, whose elements are
// reordered into NCHW order (a copy; the gradient is reordered back), so the
// next layer sees the same features in either layout.
class Flatten final : public Module {
 public:
  std::string describe() const override { return "Flatten()"; }
  Shape output_shape(const Shape& in) const override;
  void forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) override;
  Aliasing aliasing() const override { return layout_ == Layout::NHWC ? Aliasing::None : Aliasing::View; }
  void set_layout(Layout layout) override { layout_ = layout; }
  int64_t forward_traffic(const Shape&) const override { return 0; }  // a view in NCHW

 private:
  Layout layout_ = Layout::NCHW;
};

}  // namespace lockstep
