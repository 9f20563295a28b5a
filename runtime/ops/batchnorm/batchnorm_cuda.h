// Batch normalisation on the GPU: the twins of the CPU kernels in
// ops/batchnorm/batchnorm_cpu.h, plus device versions of the per-channel host math that
// nn/batchnorm.cpp does between them (statistics, running averages, parameter
// gradients, backward coefficients), so a GPU layer keeps every statistic in
// device memory and never copies to the host during a step.
//   x, y, dy, dx [N, C, H, W]; per-channel arrays [C]; M = N * H * W.
//
// A training step, as nn/batchnorm.cpp does it (device arrays; `count` is one
// double in device memory, so that with --sync-batchnorm it can be summed over
// the ranks together with the sums):
//   forward:  batchnorm_sum_cuda -> sum; batchnorm_count_cuda -> count
//             [sync: all-reduce sum and count]
//             batchnorm_mean_cuda -> mean
//             batchnorm_centered_sumsq_cuda -> m2        [sync: all-reduce m2]
//             batchnorm_finalize_stats_cuda -> invstd, scale, shift, running stats updated
//             batchnorm_apply_cuda -> y (or, joining a residual block,
//             batchnorm_apply_add_relu_cuda -> y = relu(bn(x) + r))
//   eval:     batchnorm_eval_stats_cuda -> mean, invstd, scale, shift; batchnorm_apply_cuda
//   backward: batchnorm_backward_reduce_cuda -> sum_dy, sum_dy_xmu (dy masked in place with relu)
//             batchnorm_param_grads_cuda -> dgamma, dbeta (this rank's sums, as on the CPU)
//             [sync: all-reduce sum_dy, sum_dy_xmu]
//             batchnorm_backward_coeffs_cuda -> a, b, d;  batchnorm_backward_apply_cuda -> dx
// The caller checks count > 1 on the host before the step (N * H * W > 1 on
// this rank suffices: summing over ranks only adds to it); the device kernels
// cannot throw.
//
// Channels-last activations (--layout nhwc) come as the shape {N*H*W, C, 1}
// (hw == 1): the apply passes then run one thread per element (channel
// i % C), and the reductions put neighbouring channels on neighbouring threads
// (a warp reads 32 channels of one row, or 32 packs of 16 bytes -- 8 bf16 or
// 4 fp32 channels each -- when C and the pointers allow), each thread summing
// its channels over a strided set of rows; slices and their order again
// depend only on the shape (not on the channels per thread), so the sums are
// deterministic, and equal to NCHW's up to the order of fp64 additions.
//
// Every function queues its work on the given stream (ctx's stream for the
// reductions) and returns: asynchronous. All pointers are device memory.
// Reductions: per channel, fixed slices of the M values are summed by separate
// blocks in double (each value or product converted exactly), the block
// partials (in ctx.workspace()) then added by one warp per channel in a fixed
// order (32 strided runs, then a fixed tree): the order depends only on the shape, so results are the same on every run and every rank. The
// CPU sums in fp32 within a plane, so the two agree to fp32 rounding of plane
// sums, not bitwise. The per-channel math kernels evaluate the CPU layer's
// expressions operation by operation in the same precisions (explicitly
// rounded intrinsics: no fused multiply-adds), so from equal inputs they give
// the CPU's values.
//
// Data types: the six functions that touch activations take their type first,
// dt = DType::F32, BF16 (__nv_bfloat16) or F16 (IEEE __half; any other dtype
// throws), x, y, dy, dx being dt arrays (passed as void*); every per-channel
// array (sums, mean, scale, shift, a, b, d, and the statistics/parameters of
// the math functions) stays fp32/fp64. In 16 bits (mixed precision) they run
// the same kernels as in fp32: each 16-bit value
// widened exactly to fp32, then the fp32 path's arithmetic (fp64 accumulation
// in the reductions), the outputs y, dx (and the masked dy, whose zeros are
// exact) rounded to dt once (nearest even). So their sums equal the fp32
// functions' on the widened values, and y, dx are the fp32 functions' results
// rounded to dt: for fp16 that includes its range, values beyond 65504 become
// +-inf and those below 2^-14 in magnitude lose precision as subnormals.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/context.h"
#include "ops/batchnorm/batchnorm_cpu.h"
#include "tensor/dtype.h"

namespace lockstep::ops {

// ---- the CPU ops' twins: activations x, y, dy, dx, r of type dt ----
// sum[c] = sum of x over n and hw.                                  x [N, C, HW] -> sum [C] (double)
void batchnorm_sum_cuda(DType dt, cuda::Context& ctx, const BatchNormShape& s, const void* x, double* sum);
// m2[c] = sum of (x - mean[c])^2 over n and hw.                      mean [C] -> m2 [C] (double)
void batchnorm_centered_sumsq_cuda(DType dt, cuda::Context& ctx, const BatchNormShape& s, const void* x,
                                   const float* mean, double* m2);
// With relu, first zeroes dy where y <= 0 (in place). sum_dy[c] = sum of dy,
// sum_dy_xmu[c] = sum of dy * (x - mean[c]).                         -> sum_dy, sum_dy_xmu [C] (double)
void batchnorm_backward_reduce_cuda(DType dt, cuda::Context& ctx, const BatchNormShape& s, const void* x,
                                    const void* y, void* dy, bool relu, const float* mean, double* sum_dy,
                                    double* sum_dy_xmu);
// y = x * scale[c] + shift[c], then max(0, .) when relu (16-bit: rounded once
// from the fp32 result). y may equal x.
void batchnorm_apply_cuda(DType dt, const BatchNormShape& s, const void* x, const float* scale, const float* shift,
                          void* y, bool relu, cudaStream_t stream);
// The residual join fused in (a bottleneck's last batch norm, Residual):
// y = max(0, (x * scale[c] + shift[c]) + r) in fp32, as
// batchnorm_apply_add_relu_cpu (16-bit: rounded once; the unfused path rounds
// the batch norm's output to dt, then the sum). r [N, C, HW] like x. y may
// equal x or r.
void batchnorm_apply_add_relu_cuda(DType dt, const BatchNormShape& s, const void* x, const float* scale,
                                   const float* shift, const void* r, void* y, cudaStream_t stream);
// dx = a[c] * dy + b[c] * x + d[c] (16-bit: rounded once). dx may equal dy.
void batchnorm_backward_apply_cuda(DType dt, const BatchNormShape& s, const void* x, const void* dy, const float* a,
                                   const float* b, const float* d, void* dx, cudaStream_t stream);

// ---- the host step's math (batchnorm_step_cpu.cpp), per channel on the device ----
// *count = N * H * W (the values each channel's statistics cover on this rank).
void batchnorm_count_cuda(const BatchNormShape& s, double* count, cudaStream_t stream);
// mean[c] = (float)(sum[c] / *count).
void batchnorm_mean_cuda(int64_t channels, const double* sum, const double* count, float* mean, cudaStream_t stream);
// Training statistics from m2 (the centred sum of squares) and the mean:
//   var = m2 / count (biased), invstd = (float)(1 / sqrt(var + eps)),
//   running_mean = (1 - momentum) * running_mean + momentum * mean,
//   running_var = (1 - momentum) * running_var + momentum * var * count / (count - 1)  (unbiased),
//   scale = gamma * invstd, shift = beta - mean * scale.
void batchnorm_finalize_stats_cuda(int64_t channels, const double* m2, const double* count, const float* mean,
                                   const float* gamma, const float* beta, float eps, float momentum, float* invstd,
                                   float* scale, float* shift, float* running_mean, float* running_var,
                                   cudaStream_t stream);
// Evaluation statistics: mean = running_mean, invstd = 1 / sqrt(running_var + eps)
// (fp32), scale and shift as above.
void batchnorm_eval_stats_cuda(int64_t channels, const float* running_mean, const float* running_var,
                               const float* gamma, const float* beta, float eps, float* mean, float* invstd,
                               float* scale, float* shift, cudaStream_t stream);
// dgamma (+)= (float)(sum_dy_xmu * invstd), dbeta (+)= (float)sum_dy.
void batchnorm_param_grads_cuda(int64_t channels, const double* sum_dy, const double* sum_dy_xmu,
                                const float* invstd, float* dgamma, float* dbeta, bool accumulate,
                                cudaStream_t stream);
// dx = a * dy + b * x + d with, in double, a = gamma * invstd and
//   training:   b = -a * invstd^2 * sum_dy_xmu / count,  d = -a * sum_dy / count - b * mean
//   evaluation: b = d = 0 (the statistics were constants; count is not read and may be null).
void batchnorm_backward_coeffs_cuda(int64_t channels, bool training, const double* sum_dy, const double* sum_dy_xmu,
                                    const double* count, const float* mean, const float* invstd, const float* gamma,
                                    float* a, float* b, float* d, cudaStream_t stream);

}  // namespace lockstep::ops
