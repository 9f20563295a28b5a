// TiedLinear: shapes and the linear op on the embedding's table.
#include "nn/tied_linear.h"

#include "ops/linear/linear.h"

namespace lockstep {
namespace {

// [B, ..., n] as [rows, n] (shares storage).
Tensor rows_of(const Tensor& t) {
  const int64_t n = t.size(t.rank() - 1);
  return t.rank() == 2 ? t : t.reshape(Shape{t.numel() / n, n});
}

}  // namespace

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
  Tensor y2 = rows_of(y);
  ops::linear_forward(rows_of(x), table().value, nullptr, y2, false, w16_, ops::Exec{ctx.gpu, "TiedLinear"});
}

void TiedLinear::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  const Parameter& w = table();
  Tensor dx2 = dx ? rows_of(*dx) : Tensor();
  Tensor dw = w.grad;  // the embedding's gradient view: written here, added to by its backward
  ops::linear_backward(rows_of(x), w.value, w16_, rows_of(y), rows_of(dy), dx ? &dx2 : nullptr, dw, nullptr,
                       ctx.accumulate, false, ops::Exec{ctx.gpu, "TiedLinear"});
}

int64_t TiedLinear::forward_flops(const Shape& in) const {
  return 2 * (in.numel() / embedding_->channels()) * embedding_->channels() * embedding_->vocab();
}

}  // namespace lockstep
