// 2-D max and average pooling, floor mode (CPU).
//   x [N, C, H, W] -> y [N, C, OH, OW],  OH = (H + 2 pad - K) / stride + 1
// in either layout (tensor/layout.h): NCHW (default), or with s.layout = NHWC
// x [N, H, W, C] -> y [N, OH, OW, C] (s.c channels; N = planes / c). Results
// are the same values in both layouts, bit for bit (same arithmetic per output).
// Padding (max pooling only) never wins: windows are clipped to the input, as
// with PyTorch's -inf padding.
// Max pooling records the winning input index per output (within its plane)
// so backward is a scatter (NCHW; the NHWC kernels gather in the same order of
// additions); average pooling divides by K*K.
#pragma once

#include <cstdint>

#include "tensor/layout.h"

namespace lockstep::ops {

struct Pool2dShape {
  int64_t planes;  // N * C
  int64_t h, w, k, stride, oh, ow;
  int64_t pad = 0;  // max pooling only
  Layout layout = Layout::NCHW;
  int64_t c = 1;  // channels: required (planes % c == 0) with NHWC, unused with NCHW
};

void maxpool2d_forward_cpu(const Pool2dShape& s, const float* x, float* y, int32_t* argmax);
void maxpool2d_backward_cpu(const Pool2dShape& s, const float* dy, const int32_t* argmax, float* dx);
void avgpool2d_forward_cpu(const Pool2dShape& s, const float* x, float* y);
void avgpool2d_backward_cpu(const Pool2dShape& s, const float* dy, float* dx);

// Global average pooling: x [planes, hw] -> y [planes] (the mean of each plane).
void global_avgpool_forward_cpu(int64_t planes, int64_t hw, const float* x, float* y);
// dx[p, i] = dy[p] / hw.
void global_avgpool_backward_cpu(int64_t planes, int64_t hw, const float* dy, float* dx);
// NHWC twins: x [n, hw, c] -> y [n, c], and dy [n, c] -> dx [n, hw, c]; each
// output is the NCHW function's value bit for bit (same summation order).
void global_avgpool_nhwc_forward_cpu(int64_t n, int64_t c, int64_t hw, const float* x, float* y);
void global_avgpool_nhwc_backward_cpu(int64_t n, int64_t c, int64_t hw, const float* dy, float* dx);

}  // namespace lockstep::ops
