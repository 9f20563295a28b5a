// Dispatch for ops/batchnorm/batchnorm.h: the host step for CPU tensors, the
// device step for GPU tensors.
#include "ops/batchnorm/batchnorm.h"

#include "ops/batchnorm/batchnorm_steps.h"
#include "ops/memory/memory.h"

namespace lockstep::ops {

int64_t BatchNormState::held_bytes() const {
  const auto vec = [](const auto& v) { return static_cast<int64_t>(v.size() * sizeof(v[0])); };
  return vec(mean) + vec(invstd) + vec(scale) + vec(shift) + vec(sums) + vec(a) + vec(b) + vec(d) + vec(host_sync) +
         static_cast<int64_t>(dev_f.nbytes() + dev_d.nbytes());
}

void batchnorm_forward(const BatchNormShape& s, const Tensor& x, const Tensor* residual, Tensor& y, bool relu,
                       bool training, StatsReducer* sync, const BatchNormParams& p, BatchNormState& st,
                       const Exec& ex) {
  if (on_gpu(x, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    batchnorm_forward_device(s, x, residual, y, relu, training, sync, p, st, ex);
#endif
    return;
  }
  batchnorm_forward_host(s, x, residual, y, relu, training, sync, p, st, ex);
}

void batchnorm_backward(const BatchNormShape& s, const Tensor& x, const Tensor& ym, const Tensor& dy, Tensor* dx,
                        bool masked, float* dgamma, float* dbeta, bool accumulate, StatsReducer* sync,
                        const BatchNormParams& p, BatchNormState& st, const Exec& ex) {
  if (on_gpu(x, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    batchnorm_backward_device(s, x, ym, dy, dx, masked, dgamma, dbeta, accumulate, sync, p, st, ex);
#endif
    return;
  }
  batchnorm_backward_host(s, x, ym, dy, dx, masked, dgamma, dbeta, accumulate, sync, p, st, ex);
}

}  // namespace lockstep::ops
