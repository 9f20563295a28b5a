// Fully connected layer kernels (CPU).
//   x [B, in]   w [out, in]   b [out] (nullable)   y [B, out]
// forward: y = x w^T + b, then ReLU when `relu` (fused).
// backward: with `relu`, dy is first masked by y > 0 (in place);
//   dw (+)= dy^T x,  db (+)= column sums of dy,  dx = dy w (dx nullable).
// Rows of the batch (forward, dx) and rows of dw are split across threads.
#pragma once

#include <cstdint>

namespace lockstep::ops {

void linear_forward_cpu(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* b, float* y,
                        bool relu);
void linear_backward_cpu(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* y,
                         float* dy, float* dx, float* dw, float* db, bool accumulate, bool relu);

}  // namespace lockstep::ops
