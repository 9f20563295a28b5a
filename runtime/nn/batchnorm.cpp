// BatchNorm2d: statistics, running averages, the backward coefficients.
#include "nn/batchnorm.h"

#include <cmath>

#include "nn/device_util.h"
#include "ops/batchnorm.h"
#ifdef LOCKSTEP_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda/check.h"
#include "ops/batchnorm_cuda.h"
#endif

namespace lockstep {

BatchNorm2d::BatchNorm2d(int64_t channels, float eps, float momentum) : c_(channels), eps_(eps), momentum_(momentum) {
  LS_CHECK(c_ > 0 && eps_ > 0.f && momentum_ >= 0.f && momentum_ <= 1.f, "{}: invalid configuration", describe());
}

std::string BatchNorm2d::describe() const { return fmt::format("BatchNorm2d({})", c_); }

HeldMemory BatchNorm2d::held_memory() const {
  const auto vec = [](const auto& v) { return static_cast<int64_t>(v.size() * sizeof(v[0])); };
  return {0, 0,
          vec(mean_) + vec(invstd_) + vec(scale_) + vec(shift_) + vec(sums_) + vec(a_) + vec(b_coef_) + vec(d_) +
              vec(host_sync_) + static_cast<int64_t>(dev_f_.nbytes() + dev_d_.nbytes())};
}

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

void BatchNorm2d::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  LS_CHECK(running_mean_ && running_var_, "{}: buffers were never declared", describe());
  join_out_ = Tensor();
  if (x.device().is_cuda()) return forward_cuda(x, y, ctx);
  prepare_cpu(x, ctx);
  ops::batchnorm_apply_cpu(shape_of(x), x.data<float>(), scale_.data(), shift_.data(), y.data<float>(), relu_);
}

void BatchNorm2d::forward_add_relu(const Tensor& x, const Tensor& residual, Tensor& y, const ForwardContext& ctx) {
  LS_CHECK(running_mean_ && running_var_, "{}: buffers were never declared", describe());
  LS_CHECK(!relu_, "{}: the fused residual join needs no fused ReLU", describe());
  LS_CHECK(residual.shape() == x.shape() && y.shape() == x.shape() && residual.dtype() == x.dtype() &&
               y.dtype() == x.dtype() && residual.device() == x.device() && y.device() == x.device(),
           "{}: residual {} {} and output {} {} for input {} {}", describe(), dtype_name(residual.dtype()),
           residual.shape().str(), dtype_name(y.dtype()), y.shape().str(), dtype_name(x.dtype()), x.shape().str());
  join_out_ = y;
  if (x.device().is_cuda()) return forward_cuda(x, y, ctx, &residual);
  prepare_cpu(x, ctx);
  ops::batchnorm_apply_add_relu_cpu(shape_of(x), x.data<float>(), scale_.data(), shift_.data(),
                                    residual.data<float>(), y.data<float>());
}

void BatchNorm2d::prepare_cpu(const Tensor& x, const ForwardContext& ctx) {
  const ops::BatchNormShape s = shape_of(x);
  const auto C = static_cast<size_t>(c_);
  mean_.resize(C);
  invstd_.resize(C);
  scale_.resize(C);
  shift_.resize(C);
  const float* gamma = w_->value.data<float>();
  const float* beta = b_->value.data<float>();
  float* rm = running_mean_->value.data<float>();
  float* rv = running_var_->value.data<float>();
  training_ = ctx.training;
  synced_ = false;
  if (ctx.training) {
    // Two passes (two reductions when synced): the mean, then the squared
    // deviations from it. Sums of x^2 minus mean^2 would lose the variance of
    // a channel whose spread is small next to its mean. Unsynced, both passes
    // run channel by channel (batchnorm_moments_cpu): the second reads planes
    // the first has just brought into cache.
    sums_.assign(C + 1, 0.0);
    const double local_count = static_cast<double>(s.n * s.hw);
    if (ctx.sync) {
      ops::batchnorm_sum_cpu(s, x.data<float>(), sums_.data());
      sums_[C] = local_count;
      ctx.sync->sum(sums_.data(), static_cast<int64_t>(sums_.size()));  // sums and counts of every rank
      synced_ = true;
    }
    count_ = synced_ ? sums_[C] : local_count;
    LS_CHECK(count_ > 1, "{}: batch statistics need more than one value per channel (input {})", describe(),
             x.shape().str());
    if (synced_) {
      for (size_t c = 0; c < C; ++c) mean_[c] = static_cast<float>(sums_[c] / count_);
      ops::batchnorm_centered_sumsq_cpu(s, x.data<float>(), mean_.data(), sums_.data());
      ctx.sync->sum(sums_.data(), static_cast<int64_t>(C));
    } else {  // m2 into sums_[0, C), the sums (not needed further) into sums_[C + 1, 2C + 1)
      sums_.resize(2 * C + 1);
      ops::batchnorm_moments_cpu(s, x.data<float>(), count_, sums_.data() + C + 1, mean_.data(), sums_.data());
    }
    for (size_t c = 0; c < C; ++c) {
      const double var = sums_[c] / count_;
      invstd_[c] = static_cast<float>(1.0 / std::sqrt(var + eps_));
      rm[c] = static_cast<float>((1.0 - momentum_) * rm[c] + momentum_ * mean_[c]);
      rv[c] = static_cast<float>((1.0 - momentum_) * rv[c] + momentum_ * var * count_ / (count_ - 1));
    }
  } else {
    for (size_t c = 0; c < C; ++c) {
      mean_[c] = rm[c];
      invstd_[c] = 1.f / std::sqrt(rv[c] + eps_);
    }
  }
  for (size_t c = 0; c < C; ++c) {
    scale_[c] = gamma[c] * invstd_[c];
    shift_[c] = beta[c] - mean_[c] * scale_[c];
  }
}

void BatchNorm2d::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  if (x.device().is_cuda()) return backward_cuda(x, y, dy, dx, ctx);
  const ops::BatchNormShape s = shape_of(x);
  const auto C = static_cast<size_t>(c_);
  sums_.assign(2 * C, 0.0);
  // dy is the caller's scratch gradient buffer: the fused ReLU masks it in place.
  // The mask of our fused ReLU, or of the residual join we computed (then y,
  // our own output, was never written).
  const bool joined = join_out_.defined() && !relu_;
  const Tensor& ym = joined ? join_out_ : y;
  ops::batchnorm_backward_reduce_cpu(s, x.data<float>(), ym.data<float>(), const_cast<float*>(dy.data<float>()),
                                     relu_ || joined,
                                     mean_.data(), sums_.data(), sums_.data() + C);
  // Parameter gradients from this rank's samples (the gradient average adds the rest).
  float* dgamma = w_->grad.data<float>();
  float* dbeta = b_->grad.data<float>();
  for (size_t c = 0; c < C; ++c) {
    const auto g = static_cast<float>(sums_[C + c] * invstd_[c]), bsum = static_cast<float>(sums_[c]);
    dgamma[c] = ctx.accumulate ? dgamma[c] + g : g;
    dbeta[c] = ctx.accumulate ? dbeta[c] + bsum : bsum;
  }
  if (!dx) return;
  if (synced_) {
    LS_CHECK(ctx.sync != nullptr, "{}: forward synced its statistics, backward has no reducer", describe());
    ctx.sync->sum(sums_.data(), static_cast<int64_t>(2 * C));
  }
  a_.resize(C);
  b_coef_.resize(C);
  d_.resize(C);
  const float* gamma = w_->value.data<float>();
  for (size_t c = 0; c < C; ++c) {
    const double a = static_cast<double>(gamma[c]) * invstd_[c];
    if (!training_) {  // the statistics were constants
      a_[c] = static_cast<float>(a);
      b_coef_[c] = d_[c] = 0.f;
      continue;
    }
    const double mean_dy = sums_[c] / count_, mean_dy_xmu = sums_[C + c] / count_;
    const double b = -a * static_cast<double>(invstd_[c]) * invstd_[c] * mean_dy_xmu;
    a_[c] = static_cast<float>(a);
    b_coef_[c] = static_cast<float>(b);
    d_[c] = static_cast<float>(-a * mean_dy - b * mean_[c]);
  }
  ops::batchnorm_backward_apply_cpu(s, x.data<float>(), dy.data<float>(), a_.data(), b_coef_.data(), d_.data(),
                                    dx->data<float>());
}

#ifdef LOCKSTEP_HAVE_CUDA
namespace {

// Sums `n` doubles of device memory over the ranks through the host (sync
// batch norm on a GPU without NCCL): copy down, StatsReducer, copy back.
void sum_through_host(StatsReducer& sync, double* dev, int64_t n, std::vector<double>& host, cudaStream_t stream) {
  host.resize(static_cast<size_t>(n));
  LS_CUDA_CHECK(cudaMemcpyAsync(host.data(), dev, static_cast<size_t>(n) * sizeof(double), cudaMemcpyDeviceToHost,
                                stream));
  LS_CUDA_CHECK(cudaStreamSynchronize(stream));
  sync.sum(host.data(), n);
  LS_CUDA_CHECK(cudaMemcpyAsync(dev, host.data(), static_cast<size_t>(n) * sizeof(double), cudaMemcpyHostToDevice,
                                stream));
  LS_CUDA_CHECK(cudaStreamSynchronize(stream));  // `host` is reused by the next reduction
}

}  // namespace

void BatchNorm2d::forward_cuda(const Tensor& x, Tensor& y, const ForwardContext& ctx, const Tensor* residual) {
  cuda::Context& gpu = gpu_context(ctx.gpu, "BatchNorm2d");
  const cudaStream_t st = gpu.raw_stream();
  const ops::BatchNormShape s = shape_of(x);
  const int64_t C = c_;
  ensure_scratch(dev_f_, 7 * C, DType::F32, x.device(), ctx.gpu, "BatchNorm2d");
  ensure_scratch(dev_d_, 4 * C + 1, DType::F64, x.device(), ctx.gpu, "BatchNorm2d");
  float* mean = dev_f_.data<float>();
  float *invstd = mean + C, *scale = mean + 2 * C, *shift = mean + 3 * C;
  double* sum = dev_d_.data<double>();
  double *count = sum + C, *m2 = sum + C + 1;
  const float* gamma = w_->value.data<float>();
  const float* beta = b_->value.data<float>();
  float* rm = running_mean_->value.data<float>();
  float* rv = running_var_->value.data<float>();
  training_ = ctx.training;
  synced_ = false;
  const DType dt = x.dtype();
  const bool half = is_16bit_float(dt);  // mixed precision: 16-bit x and y, statistics as in fp32
  if (ctx.training) {
    if (half)
      ops::batchnorm_sum_16_cuda(dt, gpu, s, x.raw_data(), sum);
    else
      ops::batchnorm_sum_cuda(gpu, s, x.data<float>(), sum);
    ops::batchnorm_count_cuda(s, count, st);
    count_ = static_cast<double>(s.n * s.hw);
    if (ctx.sync) {  // sums and counts of every rank (adjacent: one reduction)
      // On the device (NCCL) the host never sees the summed count, so the
      // check below holds this rank to more than one value per channel.
      if (!ctx.sync->sum_on_device(gpu, sum, C + 1)) {
        sum_through_host(*ctx.sync, sum, C + 1, host_sync_, st);
        count_ = host_sync_[static_cast<size_t>(C)];
      }
      synced_ = true;
    }
    LS_CHECK(count_ > 1, "{}: batch statistics need more than one value per channel (input {})", describe(),
             x.shape().str());
    ops::batchnorm_mean_cuda(C, sum, count, mean, st);
    if (half)
      ops::batchnorm_centered_sumsq_16_cuda(dt, gpu, s, x.raw_data(), mean, m2);
    else
      ops::batchnorm_centered_sumsq_cuda(gpu, s, x.data<float>(), mean, m2);
    if (synced_ && !ctx.sync->sum_on_device(gpu, m2, C)) sum_through_host(*ctx.sync, m2, C, host_sync_, st);
    ops::batchnorm_finalize_stats_cuda(C, m2, count, mean, gamma, beta, eps_, momentum_, invstd, scale, shift, rm, rv,
                                       st);
  } else {
    ops::batchnorm_eval_stats_cuda(C, rm, rv, gamma, beta, eps_, mean, invstd, scale, shift, st);
  }
  if (residual && half)
    ops::batchnorm_apply_add_relu_16_cuda(dt, s, x.raw_data(), scale, shift, residual->raw_data(), y.raw_data(), st);
  else if (residual)
    ops::batchnorm_apply_add_relu_cuda(s, x.data<float>(), scale, shift, residual->data<float>(), y.data<float>(),
                                       st);
  else if (half)
    ops::batchnorm_apply_16_cuda(dt, s, x.raw_data(), scale, shift, y.raw_data(), relu_, st);
  else
    ops::batchnorm_apply_cuda(s, x.data<float>(), scale, shift, y.data<float>(), relu_, st);
}

void BatchNorm2d::backward_cuda(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx,
                                const BackwardContext& ctx) {
  cuda::Context& gpu = gpu_context(ctx.gpu, "BatchNorm2d");
  const cudaStream_t st = gpu.raw_stream();
  LS_CHECK(dev_f_.defined() && dev_f_.device() == x.device(), "{}: backward without a forward on the GPU",
           describe());
  const ops::BatchNormShape s = shape_of(x);
  const int64_t C = c_;
  float* mean = dev_f_.data<float>();
  float *invstd = mean + C, *a = mean + 4 * C, *b = mean + 5 * C, *d = mean + 6 * C;
  double* count = dev_d_.data<double>() + C;
  double *sum_dy = count + 1 + C, *sum_dy_xmu = sum_dy + C;
  // dy is the caller's scratch gradient buffer: the fused ReLU masks it in
  // place, with our output's mask or the residual join's (as on the CPU).
  const DType dt = x.dtype();
  const bool half = is_16bit_float(dt);
  const bool joined = join_out_.defined() && !relu_;
  const Tensor& ym = joined ? join_out_ : y;
  if (half)
    ops::batchnorm_backward_reduce_16_cuda(dt, gpu, s, x.raw_data(), ym.raw_data(), dy.raw_data(), relu_ || joined,
                                           mean, sum_dy, sum_dy_xmu);
  else
    ops::batchnorm_backward_reduce_cuda(gpu, s, x.data<float>(), ym.data<float>(),
                                        const_cast<float*>(dy.data<float>()), relu_ || joined, mean, sum_dy,
                                        sum_dy_xmu);
  // Parameter gradients from this rank's samples (the gradient average adds the rest).
  ops::batchnorm_param_grads_cuda(C, sum_dy, sum_dy_xmu, invstd, w_->grad.data<float>(), b_->grad.data<float>(),
                                  ctx.accumulate, st);
  if (!dx) return;
  if (synced_) {
    LS_CHECK(ctx.sync != nullptr, "{}: forward synced its statistics, backward has no reducer", describe());
    if (!ctx.sync->sum_on_device(gpu, sum_dy, 2 * C)) sum_through_host(*ctx.sync, sum_dy, 2 * C, host_sync_, st);
  }
  ops::batchnorm_backward_coeffs_cuda(C, training_, sum_dy, sum_dy_xmu, training_ ? count : nullptr, mean, invstd,
                                      w_->value.data<float>(), a, b, d, st);
  if (half)
    ops::batchnorm_backward_apply_16_cuda(dt, s, x.raw_data(), dy.raw_data(), a, b, d, dx->raw_data(), st);
  else
    ops::batchnorm_backward_apply_cuda(s, x.data<float>(), dy.data<float>(), a, b, d, dx->data<float>(), st);
}
#else
void BatchNorm2d::forward_cuda(const Tensor& x, Tensor&, const ForwardContext&, const Tensor*) {
  LS_THROW("BatchNorm2d: tensors on {} need a build with CUDA support", x.device().str());
}
void BatchNorm2d::backward_cuda(const Tensor& x, const Tensor&, const Tensor&, Tensor*, const BackwardContext&) {
  LS_THROW("BatchNorm2d: tensors on {} need a build with CUDA support", x.device().str());
}
#endif

}  // namespace lockstep
