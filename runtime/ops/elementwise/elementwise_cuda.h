// Elementwise kernels on flat device arrays (GPU): ReLU, residual additions,
// scaling, dropout, and fp32 <-> 16-bit conversion; the GPU kernels of
// ops/elementwise/elementwise_cpu.h, and GELU (conversion: of dtype.cpp's
// float_to_bf16/half). Called through ops/elementwise/elementwise.h.
// Every function queues its work on `stream` and returns (asynchronous); all
// pointers are device memory; n (or rows * row_len) may be 0. In place is
// allowed wherever the CPU op allows it (out may equal in). GELU's tanh is
// CUDA's tanhf, within an ulp or two of the host's: GELU agrees with the CPU
// to a few ulps, every other op bitwise.
//
// The data type is the first argument, dt = DType::F32, BF16 or F16 (anything
// else throws, even when there is nothing to do); data arrays are of that
// storage type (float, __nv_bfloat16 or IEEE __half) passed as void*; masks
// are uint8. fp32: each output element is one IEEE operation on the same inputs
// as the CPU op, so results are bitwise the CPU ones. 16-bit: each element's
// inputs are widened to fp32 (exact), the fp32 expression is evaluated, and the
// result is rounded to the storage type once (nearest even, fp16 subnormals
// included): bitwise the CPU op on the widened 16-bit values, rounded once to
// dt. Dropout masks are bitwise the CPU masks (ops/elementwise/dropout_hash.h)
// for every type (the hash never sees the data).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/elementwise/dropout_hash.h"
#include "tensor/dtype.h"

namespace lockstep::ops {

// y = max(0, x).                              x, y [n]
void relu_forward_cuda(DType dt, int64_t n, const void* x, void* y, cudaStream_t stream);
// dx = dy where y > 0, else 0.                y, dy, dx [n]
void relu_backward_cuda(DType dt, int64_t n, const void* y, const void* dy, void* dx, cudaStream_t stream);
// y = max(0, a + b) (a residual block's join). a, b, y [n]
void add_relu_cuda(DType dt, int64_t n, const void* a, const void* b, void* y, cudaStream_t stream);
// y += x.                                     x, y [n]
void add_inplace_cuda(DType dt, int64_t n, const void* x, void* y, cudaStream_t stream);
// GELU, tanh approximation (gelu_rule.h): y = gelu(x).   x, y [n]
void gelu_forward_cuda(DType dt, int64_t n, const void* x, void* y, cudaStream_t stream);
// dx = dy * gelu'(x).                        x, dy, dx [n]
void gelu_backward_cuda(DType dt, int64_t n, const void* x, const void* dy, void* dx, cudaStream_t stream);
// x *= alpha (fp32 only).                     x [n]
void scale_cuda(int64_t n, float alpha, float* x, cudaStream_t stream);

// Inverted dropout, the same masks as dropout_forward_cpu: row r is global
// sample row0 + r, keep probability 1 - p, kept values scaled by 1 / (1 - p).
// With dk.step set (a captured CUDA graph) the kernel draws the key itself,
// rng_key(dk.seed, dk.stream, *dk.step), and `key` is not used.
// channels_last > 0: rows are channels-last samples, as in dropout_forward_cpu.
//   x, y [rows, row_len] of dt; mask [rows, row_len] uint8 (1 = kept)
void dropout_forward_cuda(DType dt, int64_t rows, int64_t row_len, int64_t row0, uint64_t key, float p, const void* x,
                          void* y, uint8_t* mask, cudaStream_t stream, const DeviceDropoutKey& dk = {},
                          int64_t channels_last = 0);
// dx = dy * mask / (1 - p).                   mask, dy, dx [n]
void dropout_backward_cuda(DType dt, int64_t n, float p, const uint8_t* mask, const void* dy, void* dx,
                           cudaStream_t stream);

// dst = src rounded to nearest even into dt (DType::F16 or BF16).  src [n] fp32, dst [n] dt
void to_16bit_cuda(int64_t n, DType dt, const float* src, void* dst, cudaStream_t stream);
// dst = src (DType::F16 or BF16) widened to fp32 (exact).         src [n] dt, dst [n] fp32
void from_16bit_cuda(int64_t n, DType dt, const void* src, float* dst, cudaStream_t stream);

}  // namespace lockstep::ops
