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
//
// bf16 variants (mixed precision; *_bf16_cuda): x, y, dy, dx are __nv_bfloat16
// arrays passed as void*; argmax stays int32. Values are widened to fp32 (exact)
// and compared and summed in registers exactly as in the fp32 variants (fp32;
// global average pooling forward: double, then fp32), and each output is
// rounded to bf16 once on store. So max and average pooling are bitwise the
// CPU ops on the widened inputs, rounded to bf16: max-pool forward is exact (y
// is an input value; argmax is that of the widened values), and in max-pool
// backward an input covered by several overlapping windows gets the fp32 sum of
// its gradients rounded once (no bf16 partial sums). Global average pooling
// forward is the fp32 variant's result rounded to bf16.
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

// bf16 twins of the functions above, same shapes and checks; x, y, dy, dx bf16, argmax int32.
void maxpool2d_forward_bf16_cuda(const Pool2dShape& s, const void* x, void* y, int32_t* argmax,
                                 cudaStream_t stream);
void maxpool2d_backward_bf16_cuda(const Pool2dShape& s, const void* dy, const int32_t* argmax, void* dx,
                                  cudaStream_t stream);
void avgpool2d_forward_bf16_cuda(const Pool2dShape& s, const void* x, void* y, cudaStream_t stream);
void avgpool2d_backward_bf16_cuda(const Pool2dShape& s, const void* dy, void* dx, cudaStream_t stream);
void global_avgpool_forward_bf16_cuda(int64_t planes, int64_t hw, const void* x, void* y, cudaStream_t stream);
void global_avgpool_backward_bf16_cuda(int64_t planes, int64_t hw, const void* dy, void* dx, cudaStream_t stream);

}  // namespace lockstep::ops
