// 2-D max and average pooling and global average pooling on the GPU: the twins
// of ops/pool2d.h with the same semantics, NCHW, floor mode.
//   x [N, C, H, W] = [planes, h, w] -> y [planes, oh, ow],  OH = (H + 2 pad - K) / stride + 1
// Max pooling: windows are clipped to the input (padding never wins); the
// winner is the first maximum in window (row-major) order, as on the CPU, and
// argmax [planes, oh, ow] holds its index within the input plane (iy * w + ix).
// Average pooling (no padding) divides by K*K.
//
// Each function queues one kernel on `stream` and returns (asynchronous); all
// pointers are device memory. Backward kernels write every element of dx (no
// zero-fill needed) as a gather over the outputs whose window covers the
// element, adding their contributions in the CPU's order (ascending output
// index), so there are no atomics, results are deterministic, and max and
// average pooling match the CPU ops bitwise.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/pool2d.h"

namespace lockstep::ops {

// x [planes, h, w] -> y, argmax [planes, oh, ow]
void maxpool2d_forward_cuda(const Pool2dShape& s, const float* x, float* y, int32_t* argmax, cudaStream_t stream);
// dy, argmax [planes, oh, ow] -> dx [planes, h, w] (overwritten). argmax from maxpool2d_forward_cuda (or _cpu).
void maxpool2d_backward_cuda(const Pool2dShape& s, const float* dy, const int32_t* argmax, float* dx,
                             cudaStream_t stream);
// x [planes, h, w] -> y [planes, oh, ow]   (s.pad must be 0, as on the CPU path)
void avgpool2d_forward_cuda(const Pool2dShape& s, const float* x, float* y, cudaStream_t stream);
// dy [planes, oh, ow] -> dx [planes, h, w] (overwritten)
void avgpool2d_backward_cuda(const Pool2dShape& s, const float* dy, float* dx, cudaStream_t stream);

// x [planes, hw] -> y [planes]: the mean of each plane (summed in double).
void global_avgpool_forward_cuda(int64_t planes, int64_t hw, const float* x, float* y, cudaStream_t stream);
// dx[p, i] = dy[p] / hw.   dy [planes] -> dx [planes, hw]
void global_avgpool_backward_cuda(int64_t planes, int64_t hw, const float* dy, float* dx, cudaStream_t stream);

}  // namespace lockstep::ops
