// BatchNorm2d: parameters, buffers and shapes; the work is the device-neutral
// op (ops/batchnorm/batchnorm.h).
#include "nn/batchnorm.h"

namespace lockstep {

BatchNorm2d::BatchNorm2d(int64_t channels, float eps, float momentum) : c_(channels), eps_(eps), momentum_(momentum) {
  LS_CHECK(c_ > 0 && eps_ > 0.f && momentum_ >= 0.f && momentum_ <= 1.f, "{}: invalid configuration", describe());
  name_ = describe();
}

std::string BatchNorm2d::describe() const { return fmt::format("BatchNorm2d({})", c_); }

HeldMemory BatchNorm2d::held_memory() const { return {0, 0, state_.held_bytes()}; }

Shape BatchNorm2d::output_shape(const Shape& in) const {
  LS_CHECK(in.rank() == 4 && in[1] == c_, "{} expects input [N, {}, H, W], got {}", describe(), c_, in.str());
  return in;
}

ops::BatchNormShape BatchNorm2d::shape_of(const Tensor& x) const {
  const int64_t hw = x.size(2) * x.size(3);
  return layout_ == Layout::NHWC ? ops::BatchNormShape{x.size(0) * hw, c_, 1} : ops::BatchNormShape{x.size(0), c_, hw};
}

void BatchNorm2d::declare(ParameterStore& store, const std::string& prefix) {
  w_ = store.declare(prefix + "weight", Shape{c_}, /*decay=*/false);
  b_ = store.declare(prefix + "bias", Shape{c_}, /*decay=*/false);
}

void BatchNorm2d::declare_buffers(ParameterStore& buffers, const std::string& prefix) {
  running_mean_ = buffers.declare(prefix + "running_mean", Shape{c_}, false);
  running_var_ = buffers.declare(prefix + "running_var", Shape{c_}, false);
}

void BatchNorm2d::init(Rng&) {
  w_->value.fill(1.f);
  b_->value.fill(0.f);
  if (running_mean_) running_mean_->value.fill(0.f);
  if (running_var_) running_var_->value.fill(1.f);
}

ops::BatchNormParams BatchNorm2d::params() const {
  return {eps_, momentum_, w_->value.data<float>(), b_->value.data<float>(), running_mean_->value.data<float>(),
          running_var_->value.data<float>()};
}

void BatchNorm2d::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  LS_CHECK(running_mean_ && running_var_, "{}: buffers were never declared", describe());
  join_out_ = Tensor();
  ops::batchnorm_forward(shape_of(x), x, nullptr, y, relu_, ctx.training, ctx.sync, params(), state_,
                         ops::Exec{ctx.gpu, name_.c_str()});
}

void BatchNorm2d::forward_add_relu(const Tensor& x, const Tensor& residual, Tensor& y, const ForwardContext& ctx) {
  LS_CHECK(running_mean_ && running_var_, "{}: buffers were never declared", describe());
  LS_CHECK(!relu_, "{}: the fused residual join needs no fused ReLU", describe());
  LS_CHECK(residual.shape() == x.shape() && y.shape() == x.shape() && residual.dtype() == x.dtype() &&
               y.dtype() == x.dtype() && residual.device() == x.device() && y.device() == x.device(),
           "{}: residual {} {} and output {} {} for input {} {}", describe(), dtype_name(residual.dtype()),
           residual.shape().str(), dtype_name(y.dtype()), y.shape().str(), dtype_name(x.dtype()), x.shape().str());
  join_out_ = y;
  ops::batchnorm_forward(shape_of(x), x, &residual, y, false, ctx.training, ctx.sync, params(), state_,
                         ops::Exec{ctx.gpu, name_.c_str()});
}

void BatchNorm2d::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  // The mask of our fused ReLU, or of the residual join we computed (then y,
  // our own output, was never written).
  const bool joined = join_out_.defined() && !relu_;
  const Tensor& ym = joined ? join_out_ : y;
  ops::batchnorm_backward(shape_of(x), x, ym, dy, dx, relu_ || joined, w_->grad.data<float>(), b_->grad.data<float>(),
                          ctx.accumulate, ctx.sync, params(), state_, ops::Exec{ctx.gpu, name_.c_str()});
}

}  // namespace lockstep
