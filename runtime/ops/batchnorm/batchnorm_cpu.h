// Batch normalisation kernels, NCHW, per-channel statistics (CPU).
//   x, y, dy, dx [N, C, H, W]; per-channel arrays [C]; M = N * H * W.
// Forward (training): two passes, sum -> mean, then the sum of squared
// deviations from it -> var (no E[x^2] - mean^2 cancellation: a channel whose
// spread is small next to its mean keeps its precision), then
//   y = x * scale[c] + shift[c], scale = gamma / sqrt(var + eps), shift = beta - mean * scale.
// Backward: the two reductions sum(dy) and sum(dy * (x - mean)) per channel,
// then dx = a[c] * dy + b[c] * x + d[c] (the coefficients fold the mean terms
// in; the layer computes them, from global sums when statistics are synced).
// Sums accumulate 8-wide in fp32 within a plane and in double across planes;
// planes shorter than 32 values (H*W < 32) run along the images' rows instead,
// each (channel, pixel) lane summing in double across the images
// (batchnorm_cpu.cpp). Threads split channels either way, so results do not
// depend on the thread count.
#pragma once

#include <cstdint>

namespace lockstep::ops {

struct BatchNormShape {
  int64_t n, c, hw;
};

// sum[c] = sum of x over n and hw.
void batchnorm_sum_cpu(const BatchNormShape& s, const float* x, double* sum);
// m2[c] = sum of (x - mean[c])^2 over n and hw.
void batchnorm_centered_sumsq_cpu(const BatchNormShape& s, const float* x, const float* mean, double* m2);
// Both of the above for one rank's batch, channel by channel, so the second
// pass reads a channel's planes while the first has just brought them into
// cache: sum[c] as batchnorm_sum_cpu, mean[c] = float(sum[c] / count) and m2[c]
// as batchnorm_centered_sumsq_cpu, the same arithmetic (bitwise the same
// results).
void batchnorm_moments_cpu(const BatchNormShape& s, const float* x, double count, double* sum, float* mean,
                           double* m2);
// y = x * scale[c] + shift[c], then max(0, .) when relu. y may equal x.
void batchnorm_apply_cpu(const BatchNormShape& s, const float* x, const float* scale, const float* shift, float* y,
                         bool relu);
// y = max(0, x * scale[c] + shift[c] + r): a residual block's last batch norm,
// the addition of its shortcut r and its ReLU in one pass, with the roundings
// of batchnorm_apply_cpu followed by add_relu_cpu (the same bits).
void batchnorm_apply_add_relu_cpu(const BatchNormShape& s, const float* x, const float* scale, const float* shift,
                                  const float* r, float* y);
// With relu, first zeroes dy where y <= 0 (in place: dy is then the gradient
// before the ReLU). sum_dy[c] = sum of dy, sum_dy_xmu[c] = sum of dy * (x - mean[c]).
void batchnorm_backward_reduce_cpu(const BatchNormShape& s, const float* x, const float* y, float* dy, bool relu,
                                   const float* mean, double* sum_dy, double* sum_dy_xmu);
// dx = a[c] * dy + b[c] * x + d[c].
void batchnorm_backward_apply_cpu(const BatchNormShape& s, const float* x, const float* dy, const float* a,
                                  const float* b, const float* d, float* dx);

}  // namespace lockstep::ops
