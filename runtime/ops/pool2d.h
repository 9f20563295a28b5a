// 2-D max and average pooling, NCHW, floor mode (CPU).
//   x [N, C, H, W] -> y [N, C, OH, OW],  OH = (H + 2 pad - K) / stride + 1
// Padding (max pooling only) never wins: windows are clipped to the input, as
// with PyTorch's -inf padding.
// Max pooling records the winning input index per output (within its plane)
// so backward is a scatter; average pooling divides by K*K.
#pragma once

#include <cstdint>

namespace lockstep::ops {

struct Pool2dShape {
  int64_t planes;  // N * C
  int64_t h, w, k, stride, oh, ow;
  int64_t pad = 0;  // max pooling only
};

void maxpool2d_forward_cpu(const Pool2dShape& s, const float* x, float* y, int32_t* argmax);
void maxpool2d_backward_cpu(const Pool2dShape& s, const float* dy, const int32_t* argmax, float* dx);
void avgpool2d_forward_cpu(const Pool2dShape& s, const float* x, float* y);
void avgpool2d_backward_cpu(const Pool2dShape& s, const float* dy, float* dx);

// Global average pooling: x [planes, hw] -> y [planes] (the mean of each plane).
void global_avgpool_forward_cpu(int64_t planes, int64_t hw, const float* x, float* y);
// dx[p, i] = dy[p] / hw.
void global_avgpool_backward_cpu(int64_t planes, int64_t hw, const float* dy, float* dx);

}  // namespace lockstep::ops
