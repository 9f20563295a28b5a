// CausalSelfAttention: the core of GPT-2's causal multi-head self-attention
// (ops/attention/attention.h), as a layer. It has no parameters: GPT-2's QKV
// projection before it and output projection after it are Linear layers.
//
//   x [B, T, 3C]  per position q of every head, then k, then v (GPT-2's fused
//                 QKV projection); D = C / n_head channels per head
//   y [B, T, C]   heads concatenated
//
// Between forward and backward it keeps the per-row softmax statistics
// ([B, n_head, T] floats) and reads x and y again; the backward recomputes
// the attention probabilities from them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "nn/module.h"
#include "ops/workspace.h"

namespace lockstep {

class CausalSelfAttention final : public Module {
 public:
  explicit CausalSelfAttention(int64_t n_head);
  std::string describe() const override { return name_; }
  Shape output_shape(const Shape& in) const override;
  void forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) override;
  bool backward_reads_output() const override { return true; }
  // The softmax statistics, and the per-thread scratch unless it is the model's.
  HeldMemory held_memory() const override;
  // The per-thread scratch becomes the model's (nn/shared_scratch.h).
  void share_scratch(const std::shared_ptr<SharedScratch>& scratch) override;
  // Multiply-adds x2 of Q K^T and P V over the causal half only (the pairs
  // t2 <= t, T (T + 1) / 2 per head, D multiply-adds each per product):
  // 2 B C T (T + 1), where the full T x T products would count 4 B C T^2.
  // The softmax is not counted.
  int64_t forward_flops(const Shape& in) const override;

 private:
  int64_t n_head_;
  std::string name_;      // describe(), for the ops' messages (formatted once)
  Tensor lse_;            // [B, n_head, T] in its first elements: the forward's per-row log-sum-exp
  ops::Workspace ws_;     // per-thread score blocks
  bool shared_ = false;   // ws_'s per-thread buffers are the model's
};

}  // namespace lockstep
