// The two implementations of ops/batchnorm/batchnorm.h, which batchnorm.cpp
// picks from: the host's (batchnorm_step_cpu.cpp) and the GPU's
// (batchnorm_step_cuda.cpp, GPU builds only). Same arguments as there.
#pragma once

#include "ops/batchnorm/batchnorm.h"

namespace lockstep::ops {

void batchnorm_forward_host(const BatchNormShape& s, const Tensor& x, const Tensor* residual, Tensor& y, bool relu,
                            bool training, StatsReducer* sync, const BatchNormParams& p, BatchNormState& st,
                            const Exec& ex);
void batchnorm_backward_host(const BatchNormShape& s, const Tensor& x, const Tensor& ym, const Tensor& dy, Tensor* dx,
                             bool masked, float* dgamma, float* dbeta, bool accumulate, StatsReducer* sync,
                             const BatchNormParams& p, BatchNormState& st, const Exec& ex);
void batchnorm_forward_device(const BatchNormShape& s, const Tensor& x, const Tensor* residual, Tensor& y, bool relu,
                              bool training, StatsReducer* sync, const BatchNormParams& p, BatchNormState& st,
                              const Exec& ex);
void batchnorm_backward_device(const BatchNormShape& s, const Tensor& x, const Tensor& ym, const Tensor& dy,
                               Tensor* dx, bool masked, float* dgamma, float* dbeta, bool accumulate,
                               StatsReducer* sync, const BatchNormParams& p, BatchNormState& st, const Exec& ex);

}  // namespace lockstep::ops
