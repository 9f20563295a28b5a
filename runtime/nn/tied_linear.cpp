// TiedLinear: shapes and the linear op on the embedding's table.
#include "nn/tied_linear.h"

#include "ops/linear/linear.h"

namespace lockstep {

TiedLinear::TiedLinear(Embedding& embedding) : embedding_(&embedding) { embedding.tie(); }

std::string TiedLinear::describe() const {
  return fmt::format("TiedLinear({}, {})", embedding_->channels(), embedding_->vocab());
}

Shape TiedLinear::output_shape(const Shape& in) const {
  LS_CHECK(in.rank() >= 2 && in[in.rank() - 1] == embedding_->channels(), "{} expects input [B, ..., {}], got {}",
           describe(), embedding_->channels(), in.str());
  Shape out = in;
  out[out.rank() - 1] = embedding_->vocab();
  return out;
}

const Parameter& TiedLinear::table() const {
  const Parameter* p = embedding_->token_table();
  LS_CHECK(p != nullptr, "{}: the embedding it shares has not been declared", describe());
  return *p;
}

void TiedLinear::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  ops::linear_forward(x, table().value.narrow_rows(embedding_->vocab()), nullptr, y, false, w16_,
                      ops::Exec{ctx.gpu, "TiedLinear"});
}

void TiedLinear::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  const Parameter& w = table();
  // The embedding's gradient view (the vocabulary's rows; padding rows stay
  // zero): written here, added to by its backward.
  Tensor dw = w.grad.narrow_rows(embedding_->vocab());
  ops::linear_backward(x, w.value.narrow_rows(embedding_->vocab()), w16_, y, dy, dx, dw, nullptr, ctx.accumulate, false,
                       ops::Exec{ctx.gpu, "TiedLinear"});
}

int64_t TiedLinear::forward_flops(const Shape& in) const {
  return 2 * (in.numel() / embedding_->channels()) * embedding_->channels() * embedding_->vocab();
}

}  // namespace lockstep
