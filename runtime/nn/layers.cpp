// Layer implementations: shape logic, parameter declaration, initialisation
// (PyTorch's defaults: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and
// biases), and dispatch to the kernels in ops/: the CPU ones, or for tensors
// on a GPU the CUDA twins, queued on the context's stream -- the fp32 ones, or
// for 16-bit activations (mixed precision, bf16 or fp16) the 16-bit ones, with
// Linear and Conv2d rounding their fp32 weights to that type at each forward.
#include "nn/layers.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/hash.h"
#include "nn/device_util.h"
#include "nn/shared_scratch.h"
#include "ops/elementwise.h"
#include "ops/layout.h"
#include "ops/linear.h"
#include "ops/pool2d.h"
#ifdef LOCKSTEP_HAVE_CUDA
#include "cuda/context.h"
#include "ops/conv2d_cuda.h"
#include "ops/elementwise_cuda.h"
#include "ops/layout_cuda.h"
#include "ops/linear_cuda.h"
#include "ops/pool2d_cuda.h"
#endif

namespace lockstep {
namespace {

void uniform_init(Tensor& t, Rng& rng, float bound) {
  for (float& v : t.span<float>()) v = rng.uniform(-bound, bound);
}

void require_cpu(const Tensor& t, const char* layer) {
  LS_CHECK(t.device().is_cpu(), "{}: tensors on {} are not supported by this build", layer, t.device().str());
}

#ifdef LOCKSTEP_HAVE_CUDA
// Mixed precision: the fp32 master weight `w` rounded to `dt` (bf16 or fp16)
// into `w16` (grown as needed), queued on the context's stream; returns w16's
// data. Done by every forward (weights change every step); backward reuses it.
const void* round_weight_16(const Tensor& w, DType dt, Tensor& w16, cuda::Context& gpu) {
  ensure_scratch(w16, w.numel(), dt, w.device(), &gpu, "16-bit weight");
  ops::to_16bit_cuda(w.numel(), dt, w.data<float>(), w16.raw_data(), gpu.raw_stream());
  return w16.raw_data();
}
#endif

}  // namespace

// ---------------------------------------------------------------- Linear
Linear::Linear(int64_t in, int64_t out, bool bias) : in_(in), out_(out), bias_(bias) {
  LS_CHECK(in > 0 && out > 0, "Linear({}, {}): sizes must be positive", in, out);
}

std::string Linear::describe() const { return fmt::format("Linear({}, {}{})", in_, out_, bias_ ? "" : ", bias=false"); }

Shape Linear::output_shape(const Shape& in) const {
  LS_CHECK(in.rank() == 2 && in[1] == in_, "{} expects input [B, {}], got {}", describe(), in_, in.str());
  return Shape{in[0], out_};
}

void Linear::declare(ParameterStore& store, const std::string& prefix) {
  w_ = store.declare(prefix + "weight", Shape{out_, in_});
  if (bias_) b_ = store.declare(prefix + "bias", Shape{out_}, /*decay=*/false);
}

void Linear::init(Rng& rng) {
  const float bound = 1.f / std::sqrt(static_cast<float>(in_));
  uniform_init(w_->value, rng, bound);
  if (b_) uniform_init(b_->value, rng, bound);
}

void Linear::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
#ifdef LOCKSTEP_HAVE_CUDA
  if (x.device().is_cuda() && is_16bit_float(x.dtype())) {  // mixed precision: 16-bit weight copy, fp32 bias
    cuda::Context& gpu = gpu_context(ctx.gpu, "Linear");
    const void* w16 = round_weight_16(w_->value, x.dtype(), w16_, gpu);
    ops::linear_forward_16_cuda(x.dtype(), gpu, x.size(0), in_, out_, x.raw_data(), w16,
                                b_ ? b_->value.data<float>() : nullptr, y.raw_data(), relu_);
    return;
  }
  if (x.device().is_cuda()) {
    ops::linear_forward_cuda(gpu_context(ctx.gpu, "Linear"), x.size(0), in_, out_, x.data<float>(),
                             w_->value.data<float>(), b_ ? b_->value.data<float>() : nullptr, y.data<float>(), relu_);
    return;
  }
#endif
  require_cpu(x, "Linear");
  ops::linear_forward_cpu(x.size(0), in_, out_, x.data<float>(), w_->value.data<float>(),
                          b_ ? b_->value.data<float>() : nullptr, y.data<float>(), relu_);
}

void Linear::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  // dy is Sequential's scratch gradient buffer: the fused ReLU masks it in place.
#ifdef LOCKSTEP_HAVE_CUDA
  if (x.device().is_cuda() && is_16bit_float(x.dtype())) {  // the 16-bit weight of the forward
    LS_CHECK(w16_.defined() && w16_.device() == x.device() && w16_.dtype() == x.dtype(),
             "{}: {} backward without a {} forward", describe(), dtype_name(x.dtype()), dtype_name(x.dtype()));
    ops::linear_backward_16_cuda(x.dtype(), gpu_context(ctx.gpu, "Linear"), x.size(0), in_, out_, x.raw_data(),
                                 w16_.raw_data(), y.raw_data(), dy.raw_data(), dx ? dx->raw_data() : nullptr,
                                 w_->grad.data<float>(), b_ ? b_->grad.data<float>() : nullptr, ctx.accumulate,
                                 relu_);
    return;
  }
  if (x.device().is_cuda()) {
    ops::linear_backward_cuda(gpu_context(ctx.gpu, "Linear"), x.size(0), in_, out_, x.data<float>(),
                              w_->value.data<float>(), y.data<float>(), dy.data<float>(),
                              dx ? dx->data<float>() : nullptr, w_->grad.data<float>(),
                              b_ ? b_->grad.data<float>() : nullptr, ctx.accumulate, relu_);
    return;
  }
#endif
  ops::linear_backward_cpu(x.size(0), in_, out_, x.data<float>(), w_->value.data<float>(), y.data<float>(),
                           dy.data<float>(), dx ? dx->data<float>() : nullptr, w_->grad.data<float>(),
                           b_ ? b_->grad.data<float>() : nullptr, ctx.accumulate, relu_);
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

#ifdef LOCKSTEP_HAVE_CUDA
namespace {
bool same_geometry(const ops::ConvGeometry& a, const ops::ConvGeometry& b) {
  return a.c == b.c && a.h == b.h && a.w == b.w && a.kh == b.kh && a.kw == b.kw && a.stride == b.stride &&
         a.pad == b.pad && a.oh == b.oh && a.ow == b.ow;
}
}  // namespace
#endif

void Conv2d::share_scratch(const std::shared_ptr<SharedScratch>& scratch) {
  ws_.share_thread_buffers(scratch->workspace());
}

void Conv2d::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  const auto s = conv_shape(x.shape(), y.shape(), k_, stride_, pad_);
  winograd_filters_ready_ = false;
  const float* b = b_ ? b_->value.data<float>() : nullptr;
#ifdef LOCKSTEP_HAVE_CUDA
  if (x.device().is_cuda()) {
    const DType dt = x.dtype();
    if (!gpu_ || !same_geometry(gpu_geometry_, s.g) || gpu_dtype_ != dt || gpu_layout_ != layout_) {
      // descriptors for a new image size, type or layout
      const ops::ConvData data = dt == DType::BF16  ? ops::ConvData::BF16
                                 : dt == DType::F16 ? ops::ConvData::F16
                                                    : ops::ConvData::F32;
      gpu_ = std::make_shared<ops::Conv2dCuda>(out_c_, s.g, data, layout_);
      gpu_geometry_ = s.g;
      gpu_dtype_ = dt;
      gpu_layout_ = layout_;
    }
    cuda::Context& gpu = gpu_context(ctx.gpu, "Conv2d");
    if (is_16bit_float(dt))  // mixed precision: 16-bit weight copy, fp32 bias
      gpu_->forward_16(gpu, s.n, x.raw_data(), round_weight_16(w_->value, dt, w16_, gpu), b, y.raw_data(), relu_);
    else
      gpu_->forward(gpu, s.n, x.data<float>(), w_->value.data<float>(), b, y.data<float>(), relu_);
    return;
  }
#endif
  require_cpu(x, "Conv2d");
  if (layout_ == Layout::NHWC) {
    ops::conv2d_nhwc_forward_cpu(s, x.data<float>(), w_->value.data<float>(), b, y.data<float>(), relu_, ws_);
  } else if (ops::conv2d_choose(s, algo_) == ops::ConvAlgo::Winograd) {
    ops::conv2d_winograd_forward_cpu(s, x.data<float>(), w_->value.data<float>(), b, y.data<float>(), relu_, ws_);
    winograd_filters_ready_ = true;
  } else {
    ops::conv2d_forward_cpu(s, x.data<float>(), w_->value.data<float>(), b, y.data<float>(), relu_, ws_);
    winograd_filters_ready_ = false;  // the choice depends on the batch: no stale transform for a later backward
  }
}

void Conv2d::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  const auto s = conv_shape(x.shape(), y.shape(), k_, stride_, pad_);
  float* db = b_ ? b_->grad.data<float>() : nullptr;
#ifdef LOCKSTEP_HAVE_CUDA
  if (x.device().is_cuda() && is_16bit_float(x.dtype())) {  // the 16-bit weight of the forward
    LS_CHECK(gpu_ && same_geometry(gpu_geometry_, s.g) && gpu_dtype_ == x.dtype() && gpu_layout_ == layout_ &&
                 w16_.defined(),
             "{}: {} backward without a {} forward on this input", describe(), dtype_name(x.dtype()),
             dtype_name(x.dtype()));
    gpu_->backward_16(gpu_context(ctx.gpu, "Conv2d"), s.n, x.raw_data(), w16_.raw_data(), y.raw_data(),
                      dy.raw_data(), dx ? dx->raw_data() : nullptr, w_->grad.data<float>(), db, ctx.accumulate,
                      relu_);
    return;
  }
#endif
  float* dxp = dx ? dx->data<float>() : nullptr;
#ifdef LOCKSTEP_HAVE_CUDA
  if (x.device().is_cuda()) {
    LS_CHECK(gpu_ && same_geometry(gpu_geometry_, s.g) && gpu_dtype_ == DType::F32 && gpu_layout_ == layout_,
             "{}: backward without a forward on this input", describe());
    gpu_->backward(gpu_context(ctx.gpu, "Conv2d"), s.n, x.data<float>(), w_->value.data<float>(), y.data<float>(),
                   dy.data<float>(), dxp, w_->grad.data<float>(), db, ctx.accumulate, relu_);
    return;
  }
#endif
  if (layout_ == Layout::NHWC)
    ops::conv2d_nhwc_backward_cpu(s, x.data<float>(), w_->value.data<float>(), y.data<float>(), dy.data<float>(), dxp,
                                  w_->grad.data<float>(), db, ctx.accumulate, relu_, ws_);
  else if (ops::conv2d_choose(s, algo_) == ops::ConvAlgo::Winograd)
    ops::conv2d_winograd_backward_cpu(s, x.data<float>(), w_->value.data<float>(), y.data<float>(), dy.data<float>(),
                                      dxp, w_->grad.data<float>(), db, ctx.accumulate, relu_, ws_,
                                      std::exchange(winograd_filters_ready_, false));
  else
    ops::conv2d_backward_cpu(s, x.data<float>(), w_->value.data<float>(), y.data<float>(), dy.data<float>(), dxp,
                             w_->grad.data<float>(), db, ctx.accumulate, relu_, ws_);
}

// ---------------------------------------------------------------- Pool2d
Pool2d::Pool2d(PoolKind kind, int64_t kernel, int64_t stride, int64_t padding)
    : kind_(kind), k_(kernel), stride_(stride == 0 ? kernel : stride), pad_(padding) {
  LS_CHECK(k_ > 0 && stride_ > 0 && pad_ >= 0 && 2 * pad_ <= k_ && (pad_ == 0 || kind_ == PoolKind::Max),
           "{}: invalid configuration", describe());
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
#ifdef LOCKSTEP_HAVE_CUDA
  if (x.device().is_cuda()) {
    const cudaStream_t st = gpu_context(ctx.gpu, "Pool2d").raw_stream();
    const bool half = is_16bit_float(x.dtype());
    if (kind_ == PoolKind::Max) {
      ensure_scratch(argmax_, y.numel(), DType::I32, x.device(), ctx.gpu, "MaxPool2d");
      if (half)
        ops::maxpool2d_forward_16_cuda(x.dtype(), s, x.raw_data(), y.raw_data(), argmax_.data<int32_t>(), st);
      else
        ops::maxpool2d_forward_cuda(s, x.data<float>(), y.data<float>(), argmax_.data<int32_t>(), st);
    } else if (half) {
      ops::avgpool2d_forward_16_cuda(x.dtype(), s, x.raw_data(), y.raw_data(), st);
    } else {
      ops::avgpool2d_forward_cuda(s, x.data<float>(), y.data<float>(), st);
    }
    return;
  }
#endif
  require_cpu(x, describe().c_str());
  if (kind_ == PoolKind::Max) {
    ensure_scratch(argmax_, y.numel(), DType::I32, x.device(), ctx.gpu, "MaxPool2d");
    ops::maxpool2d_forward_cpu(s, x.data<float>(), y.data<float>(), argmax_.data<int32_t>());
  } else {
    ops::avgpool2d_forward_cpu(s, x.data<float>(), y.data<float>());
  }
}

void Pool2d::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  if (!dx) return;
  const auto s = pool_shape(x.shape(), y.shape(), k_, stride_, pad_, layout_);
#ifdef LOCKSTEP_HAVE_CUDA
  if (x.device().is_cuda()) {
    const cudaStream_t st = gpu_context(ctx.gpu, "Pool2d").raw_stream();
    const bool half = is_16bit_float(x.dtype());
    if (kind_ == PoolKind::Max && half)
      ops::maxpool2d_backward_16_cuda(x.dtype(), s, dy.raw_data(), argmax_.data<int32_t>(), dx->raw_data(), st);
    else if (kind_ == PoolKind::Max)
      ops::maxpool2d_backward_cuda(s, dy.data<float>(), argmax_.data<int32_t>(), dx->data<float>(), st);
    else if (half)
      ops::avgpool2d_backward_16_cuda(x.dtype(), s, dy.raw_data(), dx->raw_data(), st);
    else
      ops::avgpool2d_backward_cuda(s, dy.data<float>(), dx->data<float>(), st);
    return;
  }
#endif
  if (kind_ == PoolKind::Max)
    ops::maxpool2d_backward_cpu(s, dy.data<float>(), argmax_.data<int32_t>(), dx->data<float>());
  else
    ops::avgpool2d_backward_cpu(s, dy.data<float>(), dx->data<float>());
}

// ---------------------------------------------------------------- GlobalAvgPool
Shape GlobalAvgPool::output_shape(const Shape& in) const {
  LS_CHECK(in.rank() == 4 && in[2] * in[3] > 0, "GlobalAvgPool expects input [N, C, H, W], got {}", in.str());
  return Shape{in[0], in[1]};
}

void GlobalAvgPool::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  const int64_t n = x.size(0), c = x.size(1), hw = x.size(2) * x.size(3);
  const bool nhwc = layout_ == Layout::NHWC;
#ifdef LOCKSTEP_HAVE_CUDA
  if (x.device().is_cuda()) {
    const cudaStream_t st = gpu_context(ctx.gpu, "GlobalAvgPool").raw_stream();
    if (is_16bit_float(x.dtype()) && nhwc)
      ops::global_avgpool_nhwc_forward_16_cuda(x.dtype(), n, c, hw, x.raw_data(), y.raw_data(), st);
    else if (is_16bit_float(x.dtype()))
      ops::global_avgpool_forward_16_cuda(x.dtype(), n * c, hw, x.raw_data(), y.raw_data(), st);
    else if (nhwc)
      ops::global_avgpool_nhwc_forward_cuda(n, c, hw, x.data<float>(), y.data<float>(), st);
    else
      ops::global_avgpool_forward_cuda(n * c, hw, x.data<float>(), y.data<float>(), st);
    return;
  }
#endif
  require_cpu(x, "GlobalAvgPool");
  if (nhwc)
    ops::global_avgpool_nhwc_forward_cpu(n, c, hw, x.data<float>(), y.data<float>());
  else
    ops::global_avgpool_forward_cpu(n * c, hw, x.data<float>(), y.data<float>());
}

void GlobalAvgPool::backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  if (!dx) return;
  const int64_t n = x.size(0), c = x.size(1), hw = x.size(2) * x.size(3);
  const bool nhwc = layout_ == Layout::NHWC;
#ifdef LOCKSTEP_HAVE_CUDA
  if (x.device().is_cuda()) {
    const cudaStream_t st = gpu_context(ctx.gpu, "GlobalAvgPool").raw_stream();
    if (is_16bit_float(x.dtype()) && nhwc)
      ops::global_avgpool_nhwc_backward_16_cuda(x.dtype(), n, c, hw, dy.raw_data(), dx->raw_data(), st);
    else if (is_16bit_float(x.dtype()))
      ops::global_avgpool_backward_16_cuda(x.dtype(), n * c, hw, dy.raw_data(), dx->raw_data(), st);
    else if (nhwc)
      ops::global_avgpool_nhwc_backward_cuda(n, c, hw, dy.data<float>(), dx->data<float>(), st);
    else
      ops::global_avgpool_backward_cuda(n * c, hw, dy.data<float>(), dx->data<float>(), st);
    return;
  }
#endif
  if (nhwc)
    ops::global_avgpool_nhwc_backward_cpu(n, c, hw, dy.data<float>(), dx->data<float>());
  else
    ops::global_avgpool_backward_cpu(n * c, hw, dy.data<float>(), dx->data<float>());
}

// ---------------------------------------------------------------- ReLU
void ReLU::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
#ifdef LOCKSTEP_HAVE_CUDA
  if (x.device().is_cuda()) {
    const cudaStream_t st = gpu_context(ctx.gpu, "ReLU").raw_stream();
    if (is_16bit_float(x.dtype()))
      ops::relu_forward_16_cuda(x.dtype(), x.numel(), x.raw_data(), y.raw_data(), st);
    else
      ops::relu_forward_cuda(x.numel(), x.data<float>(), y.data<float>(), st);
    return;
  }
#endif
  require_cpu(x, "ReLU");
  ops::relu_forward_cpu(x.numel(), x.data<float>(), y.data<float>());
}

void ReLU::backward(const Tensor&, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
#ifdef LOCKSTEP_HAVE_CUDA
  if (y.device().is_cuda()) {
    if (!dx) return;
    const cudaStream_t st = gpu_context(ctx.gpu, "ReLU").raw_stream();
    if (is_16bit_float(y.dtype()))
      ops::relu_backward_16_cuda(y.dtype(), y.numel(), y.raw_data(), dy.raw_data(), dx->raw_data(), st);
    else
      ops::relu_backward_cuda(y.numel(), y.data<float>(), dy.data<float>(), dx->data<float>(), st);
    return;
  }
#endif
  if (dx) ops::relu_backward_cpu(y.numel(), y.data<float>(), dy.data<float>(), dx->data<float>());
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
  active_ = ctx.training && p_ > 0.f;
  if (!active_) {
    copy_same_device(y, x, ctx.gpu, "Dropout");
    return;
  }
  ensure_scratch(mask_, x.numel(), DType::U8, x.device(), ctx.gpu, "Dropout");
  const int64_t rows = x.size(0), row_len = x.numel() / std::max<int64_t>(rows, 1);
  const uint64_t key = rng_key(ctx.seed, stream_, static_cast<uint64_t>(ctx.step));
  // NHWC samples draw by logical element index (the NCHW run's masks, reordered).
  const int64_t channels_last = layout_ == Layout::NHWC && x.rank() == 4 && x.size(1) > 1 ? x.size(1) : 0;
#ifdef LOCKSTEP_HAVE_CUDA
  if (x.device().is_cuda()) {
    const cudaStream_t st = gpu_context(ctx.gpu, "Dropout").raw_stream();
    const ops::DeviceDropoutKey dk{ctx.seed, stream_, ctx.step_dev};  // a captured step: the key drawn on the device
    if (is_16bit_float(x.dtype()))
      ops::dropout_forward_16_cuda(x.dtype(), rows, row_len, ctx.sample_offset, key, p_, x.raw_data(), y.raw_data(),
                                   mask_.data<uint8_t>(), st, dk, channels_last);
    else
      ops::dropout_forward_cuda(rows, row_len, ctx.sample_offset, key, p_, x.data<float>(), y.data<float>(),
                                mask_.data<uint8_t>(), st, dk, channels_last);
    return;
  }
#endif
  ops::dropout_forward_cpu(rows, row_len, ctx.sample_offset, key, p_, x.data<float>(), y.data<float>(),
                           mask_.data<uint8_t>(), channels_last);
}

void Dropout::backward(const Tensor&, const Tensor&, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  if (!dx) return;
  if (!active_) {
    copy_same_device(*dx, dy, ctx.gpu, "Dropout");
    return;
  }
#ifdef LOCKSTEP_HAVE_CUDA
  if (dy.device().is_cuda()) {
    const cudaStream_t st = gpu_context(ctx.gpu, "Dropout").raw_stream();
    if (is_16bit_float(dy.dtype()))
      ops::dropout_backward_16_cuda(dy.dtype(), dy.numel(), p_, mask_.data<uint8_t>(), dy.raw_data(), dx->raw_data(),
                                    st);
    else
      ops::dropout_backward_cuda(dy.numel(), p_, mask_.data<uint8_t>(), dy.data<float>(), dx->data<float>(), st);
    return;
  }
#endif
  ops::dropout_backward_cpu(dy.numel(), p_, mask_.data<uint8_t>(), dy.data<float>(), dx->data<float>());
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
    copy_same_device(y, x.reshape(y.shape()), ctx.gpu, "Flatten");
    return;
  }
  reorder_layout(x, Layout::NHWC, Layout::NCHW, y, ctx.gpu, "Flatten");
}

void Flatten::backward(const Tensor& x, const Tensor&, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  if (!dx || layout_ == Layout::NCHW) return;  // NCHW: dx is dy reshaped
  if (x.rank() != 4) {
    copy_same_device(*dx, dy.reshape(dx->shape()), ctx.gpu, "Flatten");
    return;
  }
  reorder_layout(dy.reshape(x.shape()), Layout::NCHW, Layout::NHWC, *dx, ctx.gpu, "Flatten");
}

}  // namespace lockstep
