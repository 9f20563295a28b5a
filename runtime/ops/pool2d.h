// 2-D max and average pooling, NCHW, no padding, floor mode (CPU).
//   x [N, C, H, W] -> y [N, C, OH, OW],  OH = (H - K) / stride + 1
// Max pooling records the winning input index per output (within its plane)
// so backward is a scatter; average pooling divides by K*K.
#pragma once

#include <cstdint>

namespace lockstep::ops {

struct Pool2dShape {
  int64_t planes;  // N * C
  int64_t h, w, k, stride, oh, ow;
};

void maxpool2d_forward_cpu(const Pool2dShape& s, const float* x, float* y, int32_t* argmax);
void maxpool2d_backward_cpu(const Pool2dShape& s, const float* dy, const int32_t* argmax, float* dx);
void avgpool2d_forward_cpu(const Pool2dShape& s, const float* x, float* y);
void avgpool2d_backward_cpu(const Pool2dShape& s, const float* dy, float* dx);

}  // namespace lockstep::ops
