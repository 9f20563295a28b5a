// LayerNorm: normalisation of each row over the last dimension with a learned
// scale and shift, GPT-2's (eps 1e-5).
//   x [..., C] (rank >= 2; the leading dimensions are rows) -> y [..., C]   weight, bias [C]
// weight starts at 1 and bias at 0, both declared without weight decay. The
// forward keeps each row's mean and rstd for backward (the layer's scratch).
// The work, on the CPU (a GPU has no kernel yet), is ops/layernorm/layernorm.h.
#pragma once

#include "nn/module.h"

namespace lockstep {

class LayerNorm final : public Module {
 public:
  explicit LayerNorm(int64_t channels, float eps = 1e-5f);
  std::string describe() const override;
  Shape output_shape(const Shape& in) const override;
  void declare(ParameterStore& store, const std::string& prefix) override;
  void init(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) override;
  bool has_parameters() const override { return true; }
  std::vector<const Parameter*> parameters() const override { return {w_, b_}; }
  int64_t forward_flops(const Shape& in) const override { return 2 * in.numel(); }
  HeldMemory held_memory() const override {
    return {0, 0, static_cast<int64_t>(mean_.nbytes() + rstd_.nbytes())};
  }

 private:
  int64_t c_;
  float eps_;
  std::string name_;  // describe(), for the op's messages (formatted once)
  Parameter* w_ = nullptr;
  Parameter* b_ = nullptr;
  Tensor mean_, rstd_;  // [rows] of the last forward, for backward (grown with the batch)
};

}  // namespace lockstep
