// Embedding: GPT-2's token and position embeddings (wte and wpe), summed.
//   tokens [B, T] int32, T <= max_seq -> y [B, T, C] = wte[token] + wpe[t]
//   wte [vocab, C]   wpe [max_seq, C]
// Both tables start as normal(0, 0.02). `table_rows` > vocab pads wte with
// zero rows (llm.c: 50,257 tokens in 50,304 rows, for aligned GEMMs on a
// GPU); no token and no logit reads them, so they stay zero. The tokens have no gradient: backward
// leaves dx alone (it may be null). A token outside [0, vocab) or T > max_seq
// is an InputError naming the value. wte's gradient is added to when the
// context accumulates, and always once tie() has been called: a tied output
// projection (nn/tied_linear.h) writes its part first, in backward. The
// work, on the CPU (a GPU has no kernel yet), is ops/embedding/embedding.h.
#pragma once

#include "nn/module.h"

namespace lockstep {

class Embedding final : public Module {
 public:
  Embedding(int64_t vocab, int64_t max_seq, int64_t channels, int64_t table_rows = 0);
  std::string describe() const override;
  Shape output_shape(const Shape& in) const override;
  void declare(ParameterStore& store, const std::string& prefix) override;
  void init(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) override;
  bool has_parameters() const override { return true; }
  std::vector<const Parameter*> parameters() const override { return {wte_, wpe_}; }
  int64_t forward_flops(const Shape& in) const override { return in.numel() * c_; }  // one addition per output

  // The output projection shares wte (TiedLinear): this backward adds to it.
  void tie() { tied_ = true; }
  const Parameter* token_table() const { return wte_; }  // null before declare()
  int64_t vocab() const { return vocab_; }  // tokens; wte has table_rows() >= vocab rows
  int64_t table_rows() const { return rows_; }
  int64_t max_seq() const { return max_seq_; }
  int64_t channels() const { return c_; }

 private:
  int64_t vocab_, rows_, max_seq_, c_;
  std::string name_;  // describe(), for the op's messages (formatted once)
  Parameter* wte_ = nullptr;
  Parameter* wpe_ = nullptr;
  bool tied_ = false;
};

}  // namespace lockstep
