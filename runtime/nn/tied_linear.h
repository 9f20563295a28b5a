// TiedLinear: the output projection that shares a token embedding's table,
// GPT-2's weight tying (llm.c: the classifier matmul reads wte).
//   x [B, ..., C] -> logits [B, ..., V] = x wte^T   wte [V, C] (the Embedding's
//   vocabulary rows, not its padding), no bias
// It has no parameter of its own. Its backward writes dy^T x into wte's
// gradient (or adds, when the step accumulates) and the embedding's backward,
// which runs after it, adds the embedding's part (Embedding::tie): one
// parameter used twice, both gradients summed in the flat store. It reports
// no parameters, so wte counts as final -- and its gradient bucket may be
// reduced -- only once the embedding's backward has run.
#pragma once

#include "nn/embedding.h"
#include "nn/module.h"

namespace lockstep {

class TiedLinear final : public Module {
 public:
  // `embedding` must outlive this layer and be declared before its first forward.
  explicit TiedLinear(Embedding& embedding);
  std::string describe() const override;
  Shape output_shape(const Shape& in) const override;
  void forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) override;
  HeldMemory held_memory() const override { return {0, 0, static_cast<int64_t>(w16_.nbytes())}; }
  int64_t forward_flops(const Shape& in) const override;

 private:
  const Parameter& table() const;

  Embedding* embedding_;
  Tensor w16_;  // 16-bit inputs (mixed precision): the table rounded to their type by each forward
};

}  // namespace lockstep
