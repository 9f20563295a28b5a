// LayerNorm: parameters and shapes; the work is the device-neutral op
// (ops/layernorm/layernorm.h) on the input viewed as rows [N, C].
#include "nn/layernorm.h"

#include "ops/layernorm/layernorm.h"

namespace lockstep {

LayerNorm::LayerNorm(int64_t channels, float eps) : c_(channels), eps_(eps) {
  LS_CHECK(c_ > 0 && eps_ > 0.f, "LayerNorm({}, eps={}): channels and eps must be positive", c_, eps_);
  name_ = describe();
}

std::string LayerNorm::describe() const { return fmt::format("LayerNorm({})", c_); }

Shape LayerNorm::output_shape(const Shape& in) const {
  LS_CHECK(in.rank() >= 2 && in[in.rank() - 1] == c_, "{} expects input [..., {}] of rank 2 or more, got {}",
           describe(), c_, in.str());
  return in;
}

void LayerNorm::declare(ParameterStore& store, const std::string& prefix) {
  w_ = store.declare(prefix + "weight", Shape{c_}, /*decay=*/false);
  b_ = store.declare(prefix + "bias", Shape{c_}, /*decay=*/false);
}

void LayerNorm::init(Rng&) {
  w_->value.fill(1.f);
  b_->value.fill(0.f);
}

void LayerNorm::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  const ops::Exec ex{ctx.gpu, name_.c_str()};
  output_shape(x.shape());
  const int64_t rows = x.numel() / c_;
  Tensor y2 = y.reshape(Shape{rows, c_});
  ops::layernorm_forward(x.reshape(Shape{rows, c_}), w_->value, b_->value, eps_, y2, mean_, rstd_, ex);
}

void LayerNorm::backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  const ops::Exec ex{ctx.gpu, name_.c_str()};
  const int64_t rows = x.numel() / c_;
  Tensor dx2 = dx ? dx->reshape(Shape{rows, c_}) : Tensor();
  ops::layernorm_backward(x.reshape(Shape{rows, c_}), w_->value, mean_, rstd_, dy.reshape(Shape{rows, c_}),
                          dx ? &dx2 : nullptr, w_->grad, b_->grad, ctx.accumulate, ex);
}

}  // namespace lockstep
