// The convolution's own GPU kernels around cuDNN's calls, for ops/conv/conv2d_cuda.cu:
// the bias + ReLU epilogue after the forward, the ReLU mask and bias gradient
// before the backward, and the weight gradient's widening into fp32 (16-bit)
// and reorder into [OC, C, KH, KW] (NHWC). Activations are of type dt
// (DType::F32, BF16 or F16; anything else throws), in either layout:
//   y, dy  [n, OC, P] (NCHW) or [n, P, OC] (NHWC), P = OH * OW
// The bias, db and dw are fp32. Arithmetic is fp32 (sums in fp64) with one
// rounding on store. The bias gradient sums in a fixed order (per-slice
// partials, then the partials in slice order): the same bits on every run.
// Every call queues its kernels on the given stream (ctx's) and returns.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/context.h"
#include "tensor/dtype.h"
#include "tensor/layout.h"

namespace lockstep::ops {

// y = relu?(y + b[channel]) in place (b nullable; nothing to do without b and relu).
void conv_bias_relu_cuda(DType dt, Layout layout, int64_t n, int64_t oc, int64_t P, const float* b, bool relu,
                         void* y, cudaStream_t stream);
// With relu, dy is first zeroed where y <= 0 (in place; y: the fused ReLU's
// output). db (+)= the per-channel sums of dy (db nullable; added to with
// `accumulate`). The partial sums live in ctx.workspace() until the last
// kernel here (stream order): later calls may reuse that memory.
void conv_mask_and_bias_grad_cuda(cuda::Context& ctx, DType dt, Layout layout, int64_t n, int64_t oc, int64_t P,
                                  const void* y, void* dy, float* db, bool accumulate, bool relu);
// dw (+)= src widened to fp32. src is cuDNN's weight gradient in dt:
// [OC, C, KHW] (NCHW) or [OC, KHW, C] (NHWC, reordered into dw's [OC, C, KHW]).
void conv_weight_grad_cuda(DType dt, Layout layout, int64_t oc, int64_t c, int64_t khw, const void* src, float* dw,
                           bool accumulate, cudaStream_t stream);

}  // namespace lockstep::ops
