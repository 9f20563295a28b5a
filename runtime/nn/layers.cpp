// Layer implementations: shape logic, parameter declaration, initialisation
// (PyTorch's defaults: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and
// biases), and calls to the device-neutral ops of ops/: each runs where its
// tensors are (the CPU, or a GPU on the context's stream) in their type.
#include "nn/layers.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/hash.h"
#include "nn/shared_scratch.h"
#include "ops/elementwise/elementwise.h"
#include "ops/layout/layout.h"
#include "ops/linear/linear.h"
#include "ops/memory/memory.h"
#include "ops/pool/pool.h"

namespace lockstep {
namespace {

void uniform_init(Tensor& t, Rng& rng, float bound) {
  for (float& v : t.span<float>()) v = rng.uniform(-bound, bound);
}

}  // namespace

// ---------------------------------------------------------------- Linear
Linear::Linear(int64_t in, int64_t out, bool bias) : in_(in), out_(out), bias_(bias) {
  LS_CHECK(in > 0 && out > 0, "Linear({}, {}): sizes must be positive", in, out);
}

std::string Linear::describe() const { return fmt::format("Linear({}, {}{})", in_, out_, bias_ ? "" : ", bias=false"); }

Shape Linear::output_shape(const Shape& in) const {
  LS_CHECK(in.rank() >= 2 && in[in.rank() - 1] == in_, "{} expects input [B, ..., {}], got {}", describe(), in_,
           in.str());
  Shape out = in;
  out[out.rank() - 1] = out_;
  return out;
}


void Linear::declare(ParameterStore& store, const std::string& prefix) {
  w_ = store.declare(prefix + "weight", Shape{out_, in_});
  if (bias_) b_ = store.declare(prefix + "bias", Shape{out_}, /*decay=*/false);
}

void Linear::init(Rng& rng) {
  if (normal_std_ > 0.f) {
    for (float& v : w_->value.span<float>()) v = normal_std_ * rng.normal();
    if (b_) b_->value.zero();
    return;
  }
  const float bound = 1.f / std::sqrt(static_cast<float>(in_));
  uniform_init(w_->value, rng, bound);
  if (b_) uniform_init(b_->value, rng, bound);
}

void Linear::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  ops::linear_forward(x, w_->value, b_ ? &b_->value : nullptr, y, relu_, w16_, ops::Exec{ctx.gpu, "Linear"});
}

void Linear::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  // dy is Sequential's scratch gradient buffer: the fused ReLU masks it in place.
  ops::linear_backward(x, w_->value, w16_, y, dy, dx, w_->grad, b_ ? &b_->grad : nullptr, ctx.accumulate, relu_,
                       ops::Exec{ctx.gpu, "Linear"});
}

// ---------------------------------------------------------------- Conv2d
Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding, bool bias)
    : in_c_(in_channels), out_c_(out_channels), k_(kernel), stride_(stride), pad_(padding), bias_(bias) {
  LS_CHECK(in_c_ > 0 && out_c_ > 0 && k_ > 0 && stride_ > 0 && pad_ >= 0, "{}: invalid configuration", describe());
}

std::string Conv2d::describe() const {
  return fmt::format("Conv2d({}, {}, kernel={}, stride={}, padding={}{})", in_c_, out_c_, k_, stride_, pad_,
                     bias_ ? "" : ", bias=false");
}

Shape Conv2d::output_shape(const Shape& in) const {
  LS_CHECK(in.rank() == 4 && in[1] == in_c_, "{} expects input [N, {}, H, W], got {}", describe(), in_c_, in.str());
  const int64_t oh = (in[2] + 2 * pad_ - k_) / stride_ + 1, ow = (in[3] + 2 * pad_ - k_) / stride_ + 1;
  LS_CHECK(in[2] + 2 * pad_ >= k_ && in[3] + 2 * pad_ >= k_, "{}: input {} smaller than the kernel", describe(),
           in.str());
  return Shape{in[0], out_c_, oh, ow};
}

int64_t Conv2d::forward_flops(const Shape& in) const {
  const Shape o = output_shape(in);
  return 2 * o.numel() * in_c_ * k_ * k_;
}

void Conv2d::declare(ParameterStore& store, const std::string& prefix) {
  w_ = store.declare(prefix + "weight", Shape{out_c_, in_c_, k_, k_});
  if (bias_) b_ = store.declare(prefix + "bias", Shape{out_c_}, /*decay=*/false);
}

void Conv2d::init(Rng& rng) {
  const float bound = 1.f / std::sqrt(static_cast<float>(in_c_ * k_ * k_));
  uniform_init(w_->value, rng, bound);
  if (b_) uniform_init(b_->value, rng, bound);
}

namespace {
ops::Conv2dShape conv_shape(const Shape& x, const Shape& y, int64_t k, int64_t stride, int64_t pad) {
  return {x[0], y[1], ops::ConvGeometry{x[1], x[2], x[3], k, k, stride, pad, y[2], y[3]}};
}
}  // namespace


void Conv2d::share_scratch(const std::shared_ptr<SharedScratch>& scratch) {
  op_.workspace().share_thread_buffers(scratch->workspace());
}

void Conv2d::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  op_.forward(conv_shape(x.shape(), y.shape(), k_, stride_, pad_), x, w_->value, b_ ? &b_->value : nullptr, y, relu_,
              ops::Exec{ctx.gpu, "Conv2d"});
}

void Conv2d::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  op_.backward(conv_shape(x.shape(), y.shape(), k_, stride_, pad_), x, w_->value, y, dy, dx, w_->grad,
               b_ ? &b_->grad : nullptr, ctx.accumulate, relu_, ops::Exec{ctx.gpu, "Conv2d"});
}

// ---------------------------------------------------------------- Pool2d
Pool2d::Pool2d(PoolKind kind, int64_t kernel, int64_t stride, int64_t padding)
    : kind_(kind), k_(kernel), stride_(stride == 0 ? kernel : stride), pad_(padding) {
  LS_CHECK(k_ > 0 && stride_ > 0 && pad_ >= 0 && 2 * pad_ <= k_ && (pad_ == 0 || kind_ == PoolKind::Max),
           "{}: invalid configuration", describe());
  name_ = describe();
}

std::string Pool2d::describe() const {
  return fmt::format("{}(kernel={}, stride={}{})", kind_ == PoolKind::Max ? "MaxPool2d" : "AvgPool2d", k_, stride_,
                     pad_ ? fmt::format(", padding={}", pad_) : "");
}

Shape Pool2d::output_shape(const Shape& in) const {
  LS_CHECK(in.rank() == 4 && in[2] + 2 * pad_ >= k_ && in[3] + 2 * pad_ >= k_,
           "{} expects input [N, C, H>={}, W>={}], got {}", describe(), k_ - 2 * pad_, k_ - 2 * pad_, in.str());
  return Shape{in[0], in[1], (in[2] + 2 * pad_ - k_) / stride_ + 1, (in[3] + 2 * pad_ - k_) / stride_ + 1};
}

namespace {
ops::Pool2dShape pool_shape(const Shape& x, const Shape& y, int64_t k, int64_t stride, int64_t pad, Layout layout) {
  return {x[0] * x[1], x[2], x[3], k, stride, y[2], y[3], pad, layout, x[1]};
}
}  // namespace

void Pool2d::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  const auto s = pool_shape(x.shape(), y.shape(), k_, stride_, pad_, layout_);
  const ops::Exec ex{ctx.gpu, name_.c_str()};
  if (kind_ == PoolKind::Max) {
    ops::ensure_scratch(argmax_, y.numel(), DType::I32, x.device(), ex);
    ops::maxpool2d_forward(s, x, y, argmax_, ex);
  } else {
    ops::avgpool2d_forward(s, x, y, ex);
  }
}

void Pool2d::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  if (!dx) return;
  const auto s = pool_shape(x.shape(), y.shape(), k_, stride_, pad_, layout_);
  const ops::Exec ex{ctx.gpu, name_.c_str()};
  if (kind_ == PoolKind::Max)
    ops::maxpool2d_backward(s, dy, argmax_, *dx, ex);
  else
    ops::avgpool2d_backward(s, dy, *dx, ex);
}

// ---------------------------------------------------------------- GlobalAvgPool
Shape GlobalAvgPool::output_shape(const Shape& in) const {
  LS_CHECK(in.rank() == 4 && in[2] * in[3] > 0, "GlobalAvgPool expects input [N, C, H, W], got {}", in.str());
  return Shape{in[0], in[1]};
}

void GlobalAvgPool::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  const ops::GlobalPoolShape s{x.size(0), x.size(1), x.size(2) * x.size(3), layout_};
  ops::global_avgpool_forward(s, x, y, ops::Exec{ctx.gpu, "GlobalAvgPool"});
}

void GlobalAvgPool::backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  if (!dx) return;
  const ops::GlobalPoolShape s{x.size(0), x.size(1), x.size(2) * x.size(3), layout_};
  ops::global_avgpool_backward(s, dy, *dx, ops::Exec{ctx.gpu, "GlobalAvgPool"});
}

// ---------------------------------------------------------------- ReLU
void ReLU::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  ops::relu_forward(x, y, ops::Exec{ctx.gpu, "ReLU"});
}

void ReLU::backward(const Tensor&, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  if (dx) ops::relu_backward(y, dy, *dx, ops::Exec{ctx.gpu, "ReLU"});
}

// ---------------------------------------------------------------- GELU
void GELU::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  ops::gelu_forward(x, y, ops::Exec{ctx.gpu, "GELU"});
}

void GELU::backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  if (dx) ops::gelu_backward(x, dy, *dx, ops::Exec{ctx.gpu, "GELU"});
}

// ---------------------------------------------------------------- Dropout
Dropout::Dropout(float p) : p_(p) {
  LS_CHECK(p >= 0.f && p < 1.f, "Dropout(p={}): p must be in [0, 1)", p);
}

std::string Dropout::describe() const { return fmt::format("Dropout(p={})", p_); }

void Dropout::declare(ParameterStore&, const std::string& prefix) {
  stream_ = fnv1a(prefix);
}

void Dropout::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  const ops::Exec ex{ctx.gpu, "Dropout"};
  active_ = ctx.training && p_ > 0.f;
  if (!active_) {
    ops::copy_same_device(y, x, ex);
    return;
  }
  ops::ensure_scratch(mask_, x.numel(), DType::U8, x.device(), ex);
  ops::DropoutDraw draw;
  draw.rows = x.size(0);
  draw.row_len = x.numel() / std::max<int64_t>(draw.rows, 1);
  draw.row0 = ctx.sample_offset;
  draw.key = rng_key(ctx.seed, stream_, static_cast<uint64_t>(ctx.step));
  draw.device_key = ops::DeviceDropoutKey{ctx.seed, stream_, ctx.step_dev};  // a captured step: drawn on the device
  // NHWC samples draw by logical element index (the NCHW run's masks, reordered).
  draw.channels_last = layout_ == Layout::NHWC && x.rank() == 4 && x.size(1) > 1 ? x.size(1) : 0;
  ops::dropout_forward(x, y, mask_, p_, draw, ex);
}

void Dropout::backward(const Tensor&, const Tensor&, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  if (!dx) return;
  const ops::Exec ex{ctx.gpu, "Dropout"};
  if (!active_) {
    ops::copy_same_device(*dx, dy, ex);
    return;
  }
  ops::dropout_backward(mask_, p_, dy, *dx, ex);
}

// ---------------------------------------------------------------- Flatten
Shape Flatten::output_shape(const Shape& in) const {
  LS_CHECK(in.rank() >= 1, "Flatten of a scalar");
  return Shape{in[0], in[0] ? in.numel() / in[0] : 0};
}

// NCHW: a view (y is x reshaped), nothing to do. NHWC: y has its own memory.
void Flatten::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  if (layout_ == Layout::NCHW) return;
  if (x.rank() != 4) {  // nothing to reorder
    ops::copy_same_device(y, x.reshape(y.shape()), ops::Exec{ctx.gpu, "Flatten"});
    return;
  }
  ops::reorder_layout(x, Layout::NHWC, Layout::NCHW, y, ops::Exec{ctx.gpu, "Flatten"});
}

void Flatten::backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  if (!dx || layout_ == Layout::NCHW) return;  // NCHW: dx is dy reshaped
  if (x.rank() != 4) {
    ops::copy_same_device(*dx, dy.reshape(dx->shape()), ops::Exec{ctx.gpu, "Flatten"});
    return;
  }
  ops::reorder_layout(dy.reshape(x.shape()), Layout::NCHW, Layout::NHWC, *dx, ops::Exec{ctx.gpu, "Flatten"});
}

}  // namespace lockstep
