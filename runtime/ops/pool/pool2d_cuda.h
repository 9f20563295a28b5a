// 2-D max and average pooling and global average pooling on the GPU: the twins
// of ops/pool/pool2d_cpu.h with the same semantics, floor mode, in either layout
// (tensor/layout.h):
//   NCHW (s.layout = NCHW, the default):
//     x [N, C, H, W] = [planes, h, w] -> y [planes, oh, ow],  OH = (H + 2 pad - K) / stride + 1
//   NHWC (s.layout = NHWC, s.c channels, planes % c == 0 or the call throws):
//     x [N, H, W, C] = [planes / c, h, w, c] -> y [planes / c, oh, ow, c]
// Max pooling: windows are clipped to the input (padding never wins); the
// winner is the first maximum in window (row-major) order, as on the CPU, and
// argmax (shaped like y, in y's layout) holds its index within the input plane
// (iy * w + ix) in either layout. Average pooling (no padding) divides by K*K.
// Each output is the CPU op's value in the same layout bit for bit, and NHWC
// values are the NCHW values (at the transposed positions). NHWC kernels let
// consecutive threads take consecutive channels (coalesced loads and stores).
//
// Each function queues one kernel on `stream` and returns (asynchronous); all
// pointers are device memory. Backward kernels write every element of dx (no
// zero-fill needed) as a gather over the outputs whose window covers the
// element, adding their contributions in the CPU's order (ascending output
// index), so there are no atomics, results are deterministic, and max and
// average pooling match the CPU ops bitwise.
//
// Data types: the first argument dt = DType::F32, BF16 or F16 (anything else
// throws, checked first, even when there is nothing to do); x, y, dy, dx are
// arrays of that storage type (float, __nv_bfloat16 or IEEE __half) passed as
// void*; argmax stays int32. In 16 bits (mixed precision): Values are widened to fp32 (exact) and compared and summed in
// registers exactly as in the fp32 variants (fp32; global average pooling
// forward: double, then fp32), and each output is rounded to the storage type
// once on store (nearest even). So max and average pooling are bitwise the CPU
// ops on the widened inputs, rounded once to dt: max-pool forward is exact (y
// is an input value; argmax is that of the widened values), and in max-pool
// backward an input covered by several overlapping windows gets the fp32 sum of
// its gradients rounded once (no 16-bit partial sums). Global average pooling
// forward is the fp32 variant's result rounded to dt.
//
// Global average pooling sums each plane in double: NCHW with a warp per plane
// (lanes stride the plane, then a shuffle tree: another order than the CPU's,
// so the fp32 results may differ from the CPU's by an ulp); NHWC with a thread
// per (image, channel) adding its hw values in order, exactly the CPU's sum:
// bitwise global_avgpool_nhwc_forward_cpu (16-bit: that value rounded once).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/pool/pool2d_cpu.h"
#include "tensor/dtype.h"

namespace lockstep::ops {

// Shapes below are NCHW's; with s.layout = NHWC each is [planes / c, ..., c].
// x [planes, h, w] -> y, argmax [planes, oh, ow]
void maxpool2d_forward_cuda(DType dt, const Pool2dShape& s, const void* x, void* y, int32_t* argmax,
                            cudaStream_t stream);
// dy, argmax [planes, oh, ow] -> dx [planes, h, w] (overwritten). argmax from maxpool2d_forward_cuda (or _cpu).
void maxpool2d_backward_cuda(DType dt, const Pool2dShape& s, const void* dy, const int32_t* argmax, void* dx,
                             cudaStream_t stream);
// x [planes, h, w] -> y [planes, oh, ow]   (s.pad must be 0, as on the CPU path)
void avgpool2d_forward_cuda(DType dt, const Pool2dShape& s, const void* x, void* y, cudaStream_t stream);
// dy [planes, oh, ow] -> dx [planes, h, w] (overwritten)
void avgpool2d_backward_cuda(DType dt, const Pool2dShape& s, const void* dy, void* dx, cudaStream_t stream);

// x [planes, hw] -> y [planes]: the mean of each plane (summed in double).
void global_avgpool_forward_cuda(DType dt, int64_t planes, int64_t hw, const void* x, void* y, cudaStream_t stream);
// dx[p, i] = dy[p] / hw.   dy [planes] -> dx [planes, hw]
void global_avgpool_backward_cuda(DType dt, int64_t planes, int64_t hw, const void* dy, void* dx,
                                  cudaStream_t stream);
// NHWC: x [n, hw, c] -> y [n, c] (the mean of each channel of each image,
// summed in double in position order); dx [n, hw, c] = dy[n, c] / hw.
void global_avgpool_nhwc_forward_cuda(DType dt, int64_t n, int64_t c, int64_t hw, const void* x, void* y,
                                      cudaStream_t stream);
void global_avgpool_nhwc_backward_cuda(DType dt, int64_t n, int64_t c, int64_t hw, const void* dy, void* dx,
                                       cudaStream_t stream);

}  // namespace lockstep::ops
