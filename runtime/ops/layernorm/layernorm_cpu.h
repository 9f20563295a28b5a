// Layer normalisation over the last dimension (CPU), llm.c's
// layernorm_forward_cpu and layernorm_backward_cpu:
//   x, y, dy, dx [n, c] row-major   weight, bias, dweight, dbias [c]   mean, rstd [n]
// Forward, per row, two passes: mean = sum(x) / c, summed in double and stored
// as float (a float sum loses the row's spread when its mean is large next to
// it: rows around 1000 +- 1 with c = 768 came out 2e-3 off in float, 5e-5 in
// double), then var = sum((x - mean)^2) / c in float, rstd = 1 / sqrt(var + eps),
// y = (x - mean) * rstd * weight + bias.
// Backward, with norm = (x - mean) * rstd recomputed and dnorm = weight * dy:
//   dbias = sum over rows of dy, dweight = sum over rows of norm * dy (float,
//   row order; with `accumulate` that sum is then added to the gradient),
//   dx = (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) * rstd (dx nullable;
//   it may equal dy: dweight and dbias are summed first).
// Threads split the rows for the per-row work and blocks of 32 columns for
// dweight and dbias (each column summed over all rows in row order), so the
// results do not depend on the thread count.
#pragma once

#include <cstdint>

namespace lockstep::ops {

void layernorm_forward_cpu(int64_t n, int64_t c, const float* x, const float* weight, const float* bias, float eps,
                           float* y, float* mean, float* rstd);
void layernorm_backward_cpu(int64_t n, int64_t c, const float* x, const float* weight, const float* mean,
                            const float* rstd, const float* dy, float* dx, float* dweight, float* dbias,
                            bool accumulate);

}  // namespace lockstep::ops
