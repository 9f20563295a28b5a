// Batch normalisation on a GPU (ops/batchnorm/batchnorm.h): every statistic
// stays in device memory (st.dev_f, st.dev_d); only a StatsReducer that cannot
// sum on the device copies its sums through the host (one small copy each way
// per reduction). Kernels: batchnorm_cuda.h. GPU builds only.
#include <cuda_runtime_api.h>

#include "core/error.h"
#include "cuda/context.h"
#include "ops/batchnorm/batchnorm_cuda.h"
#include "ops/batchnorm/batchnorm_steps.h"
#include "ops/memory/memory.h"

namespace lockstep::ops {
namespace {

// Sums `n` doubles of device memory over the ranks through the host: copy
// down, StatsReducer, copy back.
void sum_through_host(StatsReducer& sync, double* dev, int64_t n, std::vector<double>& host, Device device,
                      const Exec& ex) {
  host.resize(static_cast<size_t>(n));
  const size_t bytes = static_cast<size_t>(n) * sizeof(double);
  copy_to_host(host.data(), dev, bytes, device, ex);
  sync.sum(host.data(), n);
  copy_from_host(dev, host.data(), bytes, device, ex);  // waits: `host` is reused by the next reduction
}

}  // namespace

void batchnorm_forward_device(const BatchNormShape& s, const Tensor& x, const Tensor* residual, Tensor& y, bool relu,
                              bool training, StatsReducer* sync, const BatchNormParams& p, BatchNormState& st,
                              const Exec& ex) {
  cuda::Context& gpu = gpu_context(ex);
  const cudaStream_t stream = gpu.raw_stream();
  const int64_t C = s.c;
  ensure_scratch(st.dev_f, 7 * C, DType::F32, x.device(), ex);
  ensure_scratch(st.dev_d, 4 * C + 1, DType::F64, x.device(), ex);
  float* mean = st.dev_f.data<float>();
  float *invstd = mean + C, *scale = mean + 2 * C, *shift = mean + 3 * C;
  double* sum = st.dev_d.data<double>();
  double *count = sum + C, *m2 = sum + C + 1;
  st.training = training;
  st.synced = false;
  const DType dt = x.dtype();  // fp32, or 16-bit x and y (mixed precision) with statistics as in fp32
  if (training) {
    batchnorm_sum_cuda(dt, gpu, s, x.raw_data(), sum);
    batchnorm_count_cuda(s, count, stream);
    st.count = static_cast<double>(s.n * s.hw);
    if (sync) {  // sums and counts of every rank (adjacent: one reduction)
      // On the device (NCCL) the host never sees the summed count, so the
      // check below holds this rank to more than one value per channel.
      if (!sync->sum_on_device(gpu, sum, C + 1)) {
        sum_through_host(*sync, sum, C + 1, st.host_sync, x.device(), ex);
        st.count = st.host_sync[static_cast<size_t>(C)];
      }
      st.synced = true;
    }
    LS_CHECK(st.count > 1, "{}: batch statistics need more than one value per channel (input {})", ex.who,
             x.shape().str());
    batchnorm_mean_cuda(C, sum, count, mean, stream);
    batchnorm_centered_sumsq_cuda(dt, gpu, s, x.raw_data(), mean, m2);
    if (st.synced && !sync->sum_on_device(gpu, m2, C))
      sum_through_host(*sync, m2, C, st.host_sync, x.device(), ex);
    batchnorm_finalize_stats_cuda(C, m2, count, mean, p.gamma, p.beta, p.eps, p.momentum, invstd, scale, shift,
                                  p.running_mean, p.running_var, stream);
  } else {
    batchnorm_eval_stats_cuda(C, p.running_mean, p.running_var, p.gamma, p.beta, p.eps, mean, invstd, scale, shift,
                              stream);
  }
  if (residual)
    batchnorm_apply_add_relu_cuda(dt, s, x.raw_data(), scale, shift, residual->raw_data(), y.raw_data(), stream);
  else
    batchnorm_apply_cuda(dt, s, x.raw_data(), scale, shift, y.raw_data(), relu, stream);
}

void batchnorm_backward_device(const BatchNormShape& s, const Tensor& x, const Tensor& ym, const Tensor& dy,
                               Tensor* dx, bool masked, float* dgamma, float* dbeta, bool accumulate,
                               StatsReducer* sync, const BatchNormParams& p, BatchNormState& st, const Exec& ex) {
  cuda::Context& gpu = gpu_context(ex);
  const cudaStream_t stream = gpu.raw_stream();
  LS_CHECK(st.dev_f.defined() && st.dev_f.device() == x.device(), "{}: backward without a forward on the GPU",
           ex.who);
  const int64_t C = s.c;
  float* mean = st.dev_f.data<float>();
  float *invstd = mean + C, *a = mean + 4 * C, *b = mean + 5 * C, *d = mean + 6 * C;
  double* count = st.dev_d.data<double>() + C;
  double *sum_dy = count + 1 + C, *sum_dy_xmu = sum_dy + C;
  // dy is the caller's scratch gradient buffer: the fused ReLU masks it in
  // place, with our output's mask or the residual join's (as on the CPU).
  const DType dt = x.dtype();
  batchnorm_backward_reduce_cuda(dt, gpu, s, x.raw_data(), ym.raw_data(), dy.raw_data(), masked, mean, sum_dy,
                                 sum_dy_xmu);
  // Parameter gradients from this rank's samples (the gradient average adds the rest).
  batchnorm_param_grads_cuda(C, sum_dy, sum_dy_xmu, invstd, dgamma, dbeta, accumulate, stream);
  if (!dx) return;
  if (st.synced) {
    LS_CHECK(sync != nullptr, "{}: forward synced its statistics, backward has no reducer", ex.who);
    if (!sync->sum_on_device(gpu, sum_dy, 2 * C)) sum_through_host(*sync, sum_dy, 2 * C, st.host_sync, x.device(), ex);
  }
  batchnorm_backward_coeffs_cuda(C, st.training, sum_dy, sum_dy_xmu, st.training ? count : nullptr, mean, invstd,
                                 p.gamma, a, b, d, stream);
  batchnorm_backward_apply_cuda(dt, s, x.raw_data(), dy.raw_data(), a, b, d, dx->raw_data(), stream);
}

}  // namespace lockstep::ops
