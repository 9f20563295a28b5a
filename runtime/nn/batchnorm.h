// BatchNorm2d: per-channel normalisation with a learned scale and shift.
//   x [N, C, H, W] -> y [N, C, H, W]   weight, bias [C]   running_mean, running_var [C] (buffers)
// Training: statistics of the batch (this rank's, or all ranks' when the
// context carries a StatsReducer: --sync-batchnorm), and the running
// statistics move towards them (momentum 0.1; running_var unbiased), as in
// PyTorch. Evaluation: the running statistics. weight and bias are declared
// without weight decay (--no-decay-bn-bias skips them). A following ReLU can be
// fused (applied in the output pass, its mask in backward). The work, on the
// CPU or a GPU, is ops/batchnorm/batchnorm.h.
#pragma once

#include <vector>

#include "nn/module.h"
#include "ops/batchnorm/batchnorm.h"

namespace lockstep {

class BatchNorm2d final : public Module {
 public:
  explicit BatchNorm2d(int64_t channels, float eps = 1e-5f, float momentum = 0.1f);
  std::string describe() const override;
  Shape output_shape(const Shape& in) const override;
  void declare(ParameterStore& store, const std::string& prefix) override;
  void declare_buffers(ParameterStore& buffers, const std::string& prefix) override;
  void init(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) override;
  bool has_parameters() const override { return true; }
  std::vector<const Parameter*> parameters() const override { return {w_, b_}; }
  int64_t forward_flops(const Shape& in) const override { return 2 * in.numel(); }
  bool fuse_relu(bool on) override { return relu_ = on; }
  // forward() followed by y = max(0, y + residual), in one output pass
  // (Residual's join when this is its branch's last layer), y being the
  // block's output. Its own output is never written. The next backward then
  // takes dy as the gradient of the block's output, unmasked: it applies the
  // join's ReLU mask (y > 0) to dy in place in its first pass, leaving there
  // the gradient the shortcut needs too. Requires no fused ReLU; residual and
  // y shaped like x, of its dtype, on its device (CPU or GPU).
  void forward_add_relu(const Tensor& x, const Tensor& residual, Tensor& y, const ForwardContext& ctx);
  bool backward_reads_output() const override { return relu_; }
  void set_layout(Layout layout) override { layout_ = layout; }
  // A new memory plan: the block output held from the last join is a view of
  // the memory that plan replaces, so it goes (Module::plan_memory).
  void plan_memory(const std::shared_ptr<ActivationArena>&, const Shape&, Device, DType, cuda::Context*) override {
    join_out_ = Tensor();
  }
  HeldMemory held_memory() const override;  // the statistics and coefficients, host and device

 private:
  // The kernels' view of x: [N, C, H*W] in NCHW; in NHWC [N*H*W, C, 1], which
  // is the same per-channel computation over the same values in memory order
  // (the kernels index element (i, c, j) at (i * C + c) * hw + j).
  ops::BatchNormShape shape_of(const Tensor& x) const;
  ops::BatchNormParams params() const;

  int64_t c_;
  float eps_, momentum_;
  std::string name_;  // describe(), for the op's messages (formatted once)
  Layout layout_ = Layout::NCHW;
  bool relu_ = false;
  Tensor join_out_;  // set by forward_add_relu: the block output whose ReLU backward masks dy with
  Parameter* w_ = nullptr;
  Parameter* b_ = nullptr;
  Parameter* running_mean_ = nullptr;
  Parameter* running_var_ = nullptr;
  ops::BatchNormState state_;  // from the last forward, for backward; the statistics' scratch
};

}  // namespace lockstep
