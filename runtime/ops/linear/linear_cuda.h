// Fully connected layer on the GPU: cuBLAS GEMMs plus small kernels for the
// bias, the fused ReLU, its mask and the bias gradient. The GPU twins of
// ops/linear/linear_cpu.h, with the same semantics:
//   x [B, in]   w [out, in]   b [out] (nullable)   y [B, out]   (row-major)
// forward: y = x w^T + b, then ReLU when `relu` (fused).
// backward: with `relu`, dy is first masked by y > 0 (in place);
//   dw (+)= dy^T x,  db (+)= column sums of dy (db nullable),  dx = dy w (dx nullable).
// `accumulate`: dw and db are added to instead of overwritten; dx is always overwritten.
//
// Every function queues its work on ctx's stream (the cuBLAS handle is bound to
// it) and returns: asynchronous. All pointers are device memory. The fp32 GEMMs
// run in full fp32 (the handle's CUBLAS_DEFAULT_MATH: no TF32), so results match
// the CPU ops up to summation order. cuBLAS is used in its default host pointer
// mode (alpha/beta on the host). Bias gradients are computed by a kernel with a
// fixed summation order: the same bits on every run.
//
// 16-bit data (mixed precision; dt = DType::BF16 or F16): x, w, y, dy, dx
// are 16-bit arrays of type dt (passed as void*), the bias and the gradients
// dw, db are fp32 (master gradients). The GEMMs take 16-bit inputs with fp32
// accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F, tensor cores); the forward
// adds the bias and applies the ReLU to the fp32 GEMM result and rounds to dt
// once; dw is accumulated in fp32 straight from the 16-bit operands (with
// fp16 and a loss scale, an overflow there shows up as inf in dw).
#pragma once

#include <cstdint>

#include "cuda/context.h"
#include "tensor/dtype.h"

namespace lockstep::ops {

// dt = DType::F32: every array fp32 (full-fp32 GEMMs). dt = BF16 or F16: x, w,
// y of type dt, b [out] fp32 (nullable); uses ctx.workspace() for the fp32 GEMM
// result when there is a bias or a ReLU.
void linear_forward_cuda(DType dt, cuda::Context& ctx, int64_t B, int64_t in, int64_t out, const void* x,
                         const void* w, const float* b, void* y, bool relu);
// x, w, y, dy (masked in place with `relu`), dx (nullable) of type dt; dw
// [out, in] and db [out] (nullable) fp32, written or accumulated.
void linear_backward_cuda(DType dt, cuda::Context& ctx, int64_t B, int64_t in, int64_t out, const void* x,
                          const void* w, const void* y, void* dy, void* dx, float* dw, float* db, bool accumulate,
                          bool relu);

}  // namespace lockstep::ops
