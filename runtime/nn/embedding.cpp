// Embedding: parameters, shapes and initialisation; the work is the
// device-neutral op (ops/embedding/embedding.h).
#include "nn/embedding.h"

#include <algorithm>

#include "ops/embedding/embedding.h"

namespace lockstep {

Embedding::Embedding(int64_t vocab, int64_t max_seq, int64_t channels, int64_t table_rows)
    : vocab_(vocab), rows_(table_rows > 0 ? table_rows : vocab), max_seq_(max_seq), c_(channels) {
  LS_CHECK(vocab_ > 0 && max_seq_ > 0 && c_ > 0, "Embedding(vocab={}, max_seq={}, channels={}): sizes must be positive",
           vocab_, max_seq_, c_);
  LS_CHECK(rows_ >= vocab_, "Embedding: a table of {} rows for a vocabulary of {}", rows_, vocab_);
  name_ = describe();
}

std::string Embedding::describe() const {
  if (rows_ != vocab_)
    return fmt::format("Embedding(vocab={} padded to {}, max_seq={}, channels={})", vocab_, rows_, max_seq_, c_);
  return fmt::format("Embedding(vocab={}, max_seq={}, channels={})", vocab_, max_seq_, c_);
}

Shape Embedding::output_shape(const Shape& in) const {
  LS_CHECK(in.rank() == 2, "{} expects tokens [B, T], got {}", describe(), in.str());
  LS_CHECK_INPUT(in[1] <= max_seq_, "{}: sequence length {} exceeds the maximum {}", describe(), in[1], max_seq_);
  return Shape{in[0], in[1], c_};
}

void Embedding::declare(ParameterStore& store, const std::string& prefix) {
  wte_ = store.declare(prefix + "wte", Shape{rows_, c_});
  wpe_ = store.declare(prefix + "wpe", Shape{max_seq_, c_});
}

void Embedding::init(Rng& rng) {
  const std::span<float> wte = wte_->value.span<float>();
  for (int64_t i = 0; i < vocab_ * c_; ++i) wte[static_cast<size_t>(i)] = 0.02f * rng.normal();
  std::fill(wte.begin() + vocab_ * c_, wte.end(), 0.f);  // padding rows: never read, never trained
  for (float& v : wpe_->value.span<float>()) v = 0.02f * rng.normal();
}

void Embedding::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  output_shape(x.shape());
  ops::embedding_forward(x, wte_->value, wpe_->value, y, ops::Exec{ctx.gpu, name_.c_str()});
}

void Embedding::backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor*, const BackwardContext& ctx) {
  // Tied: wte holds the output projection's part of this step already, so add to it.
  ops::embedding_backward(x, dy, wte_->grad, wpe_->grad, ctx.accumulate || tied_, ctx.accumulate,
                          ops::Exec{ctx.gpu, name_.c_str()});
}

}  // namespace lockstep
