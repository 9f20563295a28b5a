// Batch normalisation's forward and backward on the tensors' device: the
// statistics (this rank's batch, or every rank's through a StatsReducer), the
// running averages, the output pass (optionally with a fused ReLU, or a
// residual block's join y = max(0, bn(x) + r)), and in backward the
// per-channel reductions, the parameter gradients and dx.
//   x, y, dy, dx, r: BatchNormShape s (NCHW [N, C, H*W], or NHWC as [N*H*W, C, 1])
//   gamma, beta, running_mean, running_var, dgamma, dbeta: [C] fp32, on x's device
// CPU: fp32 (host statistics; kernels batchnorm_cpu.h, step batchnorm_step_cpu.cpp).
// GPU: fp32, bf16 or fp16 activations, statistics in fp32/fp64 device memory,
// queued on the context's stream (kernels batchnorm_cuda.h, step
// batchnorm_step_cuda.cpp). Dispatch: batchnorm.cpp.
#pragma once

#include <vector>

#include "ops/batchnorm/batchnorm_cpu.h"
#include "ops/batchnorm/stats_reducer.h"
#include "ops/exec.h"
#include "tensor/tensor.h"

namespace lockstep::ops {

struct BatchNormParams {
  float eps = 1e-5f, momentum = 0.1f;
  const float* gamma = nullptr;
  const float* beta = nullptr;
  float* running_mean = nullptr;
  float* running_var = nullptr;
};

// What a forward leaves for its backward, and the scratch both reuse.
struct BatchNormState {
  bool training = false, synced = false;
  double count = 0;                      // samples x pixels the statistics covered (all ranks when synced)
  // CPU
  std::vector<float> mean, invstd;       // [C] statistics used
  std::vector<float> scale, shift;       // [C] y = x * scale + shift
  std::vector<double> sums;              // [2C + 1] reduction scratch
  std::vector<float> a, b, d;            // [C] backward coefficients
  // GPU
  Tensor dev_f;  // F32 [7C]: mean, invstd, scale, shift, a, b, d
  Tensor dev_d;  // F64 [4C + 1]: sum, count, m2, sum_dy, sum_dy_xmu (sum and count adjacent)
  std::vector<double> host_sync;  // with a StatsReducer that cannot sum on the device: the sums through the host

  int64_t held_bytes() const;
};

// Training: the batch statistics (summed over the ranks by `sync` when not
// null), the running averages moved towards them; evaluation: the running
// statistics. Then y = x * scale + shift, with relu max(0, .); with
// `residual`, y = max(0, x * scale + shift + residual) (relu must be false).
void batchnorm_forward(const BatchNormShape& s, const Tensor& x, const Tensor* residual, Tensor& y, bool relu,
                       bool training, StatsReducer* sync, const BatchNormParams& p, BatchNormState& st,
                       const Exec& ex);

// After a forward on x: ym is the output whose ReLU mask applies when
// `masked` (the fused ReLU's y, or the residual join's); dy is masked in place.
// dgamma, dbeta [C] written or (accumulate) added to; dx (nullable) written.
void batchnorm_backward(const BatchNormShape& s, const Tensor& x, const Tensor& ym, const Tensor& dy, Tensor* dx,
                        bool masked, float* dgamma, float* dbeta, bool accumulate, StatsReducer* sync,
                        const BatchNormParams& p, BatchNormState& st, const Exec& ex);

}  // namespace lockstep::ops
