// Batch normalisation on the host (ops/batchnorm/batchnorm.h): statistics and
// coefficients in host vectors, the passes over the data in batchnorm_cpu.cpp.
#include <cmath>

#include "core/error.h"
#include "ops/batchnorm/batchnorm_steps.h"

namespace lockstep::ops {
namespace {

// The forward up to the output pass: the statistics (training) or running
// statistics (evaluation), the running averages, st.scale and st.shift.
void prepare(const BatchNormShape& s, const Tensor& x, bool training, StatsReducer* sync, const BatchNormParams& p,
             BatchNormState& st, const Exec& ex) {
  const auto C = static_cast<size_t>(s.c);
  st.mean.resize(C);
  st.invstd.resize(C);
  st.scale.resize(C);
  st.shift.resize(C);
  float* rm = p.running_mean;
  float* rv = p.running_var;
  st.training = training;
  st.synced = false;
  if (training) {
    // Two passes (two reductions when synced): the mean, then the squared
    // deviations from it. Sums of x^2 minus mean^2 would lose the variance of
    // a channel whose spread is small next to its mean. Unsynced, both passes
    // run channel by channel (batchnorm_moments_cpu): the second reads planes
    // the first has just brought into cache.
    st.sums.assign(C + 1, 0.0);
    const double local_count = static_cast<double>(s.n * s.hw);
    if (sync) {
      batchnorm_sum_cpu(s, x.data<float>(), st.sums.data());
      st.sums[C] = local_count;
      sync->sum(st.sums.data(), static_cast<int64_t>(st.sums.size()));  // sums and counts of every rank
      st.synced = true;
    }
    st.count = st.synced ? st.sums[C] : local_count;
    LS_CHECK(st.count > 1, "{}: batch statistics need more than one value per channel (input {})", ex.who,
             x.shape().str());
    if (st.synced) {
      for (size_t c = 0; c < C; ++c) st.mean[c] = static_cast<float>(st.sums[c] / st.count);
      batchnorm_centered_sumsq_cpu(s, x.data<float>(), st.mean.data(), st.sums.data());
      sync->sum(st.sums.data(), static_cast<int64_t>(C));
    } else {  // m2 into sums[0, C), the sums (not needed further) into sums[C + 1, 2C + 1)
      st.sums.resize(2 * C + 1);
      batchnorm_moments_cpu(s, x.data<float>(), st.count, st.sums.data() + C + 1, st.mean.data(), st.sums.data());
    }
    for (size_t c = 0; c < C; ++c) {
      const double var = st.sums[c] / st.count;
      st.invstd[c] = static_cast<float>(1.0 / std::sqrt(var + p.eps));
      rm[c] = static_cast<float>((1.0 - p.momentum) * rm[c] + p.momentum * st.mean[c]);
      rv[c] = static_cast<float>((1.0 - p.momentum) * rv[c] + p.momentum * var * st.count / (st.count - 1));
    }
  } else {
    for (size_t c = 0; c < C; ++c) {
      st.mean[c] = rm[c];
      st.invstd[c] = 1.f / std::sqrt(rv[c] + p.eps);
    }
  }
  for (size_t c = 0; c < C; ++c) {
    st.scale[c] = p.gamma[c] * st.invstd[c];
    st.shift[c] = p.beta[c] - st.mean[c] * st.scale[c];
  }
}

}  // namespace

void batchnorm_forward_host(const BatchNormShape& s, const Tensor& x, const Tensor* residual, Tensor& y, bool relu,
                            bool training, StatsReducer* sync, const BatchNormParams& p, BatchNormState& st,
                            const Exec& ex) {
  prepare(s, x, training, sync, p, st, ex);
  if (residual)
    batchnorm_apply_add_relu_cpu(s, x.data<float>(), st.scale.data(), st.shift.data(), residual->data<float>(),
                                 y.data<float>());
  else
    batchnorm_apply_cpu(s, x.data<float>(), st.scale.data(), st.shift.data(), y.data<float>(), relu);
}

void batchnorm_backward_host(const BatchNormShape& s, const Tensor& x, const Tensor& ym, const Tensor& dy, Tensor* dx,
                             bool masked, float* dgamma, float* dbeta, bool accumulate, StatsReducer* sync,
                             const BatchNormParams& p, BatchNormState& st, const Exec& ex) {
  const auto C = static_cast<size_t>(s.c);
  st.sums.assign(2 * C, 0.0);
  // dy is the caller's scratch gradient buffer: the fused ReLU masks it in place.
  batchnorm_backward_reduce_cpu(s, x.data<float>(), ym.data<float>(), const_cast<float*>(dy.data<float>()), masked,
                                st.mean.data(), st.sums.data(), st.sums.data() + C);
  // Parameter gradients from this rank's samples (the gradient average adds the rest).
  for (size_t c = 0; c < C; ++c) {
    const auto g = static_cast<float>(st.sums[C + c] * st.invstd[c]), bsum = static_cast<float>(st.sums[c]);
    dgamma[c] = accumulate ? dgamma[c] + g : g;
    dbeta[c] = accumulate ? dbeta[c] + bsum : bsum;
  }
  if (!dx) return;
  if (st.synced) {
    LS_CHECK(sync != nullptr, "{}: forward synced its statistics, backward has no reducer", ex.who);
    sync->sum(st.sums.data(), static_cast<int64_t>(2 * C));
  }
  st.a.resize(C);
  st.b.resize(C);
  st.d.resize(C);
  for (size_t c = 0; c < C; ++c) {
    const double a = static_cast<double>(p.gamma[c]) * st.invstd[c];
    if (!st.training) {  // the statistics were constants
      st.a[c] = static_cast<float>(a);
      st.b[c] = st.d[c] = 0.f;
      continue;
    }
    const double mean_dy = st.sums[c] / st.count, mean_dy_xmu = st.sums[C + c] / st.count;
    const double b = -a * static_cast<double>(st.invstd[c]) * st.invstd[c] * mean_dy_xmu;
    st.a[c] = static_cast<float>(a);
    st.b[c] = static_cast<float>(b);
    st.d[c] = static_cast<float>(-a * mean_dy - b * st.mean[c]);
  }
  batchnorm_backward_apply_cpu(s, x.data<float>(), dy.data<float>(), st.a.data(), st.b.data(), st.d.data(),
                               dx->data<float>());
}

}  // namespace lockstep::ops
