// Elementwise kernels on flat device arrays (GPU): ReLU, residual additions,
// scaling, dropout, and fp32 <-> 16-bit conversion; the GPU twins of
// ops/elementwise.h (conversion: of dtype.cpp's float_to_bf16/half).
// Every function queues its work on `stream` and returns (asynchronous); all
// pointers are device memory; n (or rows * row_len) may be 0. In place is
// allowed wherever the CPU op allows it (out may equal in). Each output element
// is one IEEE operation on the same inputs as the CPU op, so results are
// bitwise the CPU ones; dropout masks are bitwise the CPU masks (ops/dropout_hash.h).
//
// 16-bit variants (mixed precision; *_16_cuda, first argument dt = DType::BF16
// or DType::F16, anything else throws): the float arrays become arrays of that
// storage type (__nv_bfloat16 or IEEE __half) passed as void* (masks stay
// uint8). Each element's inputs are widened to fp32 (exact), the fp32
// variant's expression is evaluated, and the result is rounded to the storage
// type once (nearest even, fp16 subnormals included): bitwise the CPU op on the
// widened 16-bit values, rounded once to dt. Dropout masks are the fp32 ones,
// bit for bit, for either type (the hash never sees the data).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/dropout_hash.h"
#include "tensor/dtype.h"

namespace lockstep::ops {

// y = max(0, x).                              x, y [n]
void relu_forward_cuda(int64_t n, const float* x, float* y, cudaStream_t stream);
// dx = dy where y > 0, else 0.                y, dy, dx [n]
void relu_backward_cuda(int64_t n, const float* y, const float* dy, float* dx, cudaStream_t stream);
// y = max(0, a + b) (a residual block's join). a, b, y [n]
void add_relu_cuda(int64_t n, const float* a, const float* b, float* y, cudaStream_t stream);
// y += x.                                     x, y [n]
void add_inplace_cuda(int64_t n, const float* x, float* y, cudaStream_t stream);
// x *= alpha.                                 x [n]
void scale_cuda(int64_t n, float alpha, float* x, cudaStream_t stream);

// Inverted dropout, the same masks as dropout_forward_cpu: row r is global
// sample row0 + r, keep probability 1 - p, kept values scaled by 1 / (1 - p).
// With dk.step set (a captured CUDA graph) the kernel draws the key itself,
// rng_key(dk.seed, dk.stream, *dk.step), and `key` is not used.
// channels_last > 0: rows are channels-last samples, as in dropout_forward_cpu.
//   x, y [rows, row_len] fp32; mask [rows, row_len] uint8 (1 = kept)
void dropout_forward_cuda(int64_t rows, int64_t row_len, int64_t row0, uint64_t key, float p, const float* x, float* y,
                          uint8_t* mask, cudaStream_t stream, const DeviceDropoutKey& dk = {},
                          int64_t channels_last = 0);
// dx = dy * mask / (1 - p).                   mask, dy, dx [n]
void dropout_backward_cuda(int64_t n, float p, const uint8_t* mask, const float* dy, float* dx, cudaStream_t stream);

// 16-bit twins of the functions above, same shapes; x, y, dy, dx, a, b [n] of
// type dt (DType::BF16 or F16; dropout forward: [rows, row_len]), masks uint8.
// dt is checked (throws unless BF16 or F16) even when there is nothing to do.
void relu_forward_16_cuda(DType dt, int64_t n, const void* x, void* y, cudaStream_t stream);
void relu_backward_16_cuda(DType dt, int64_t n, const void* y, const void* dy, void* dx, cudaStream_t stream);
void add_relu_16_cuda(DType dt, int64_t n, const void* a, const void* b, void* y, cudaStream_t stream);
void add_inplace_16_cuda(DType dt, int64_t n, const void* x, void* y, cudaStream_t stream);
void dropout_forward_16_cuda(DType dt, int64_t rows, int64_t row_len, int64_t row0, uint64_t key, float p,
                             const void* x, void* y, uint8_t* mask, cudaStream_t stream,
                             const DeviceDropoutKey& dk = {}, int64_t channels_last = 0);
void dropout_backward_16_cuda(DType dt, int64_t n, float p, const uint8_t* mask, const void* dy, void* dx,
                              cudaStream_t stream);

// dst = src rounded to nearest even into dt (DType::F16 or BF16).  src [n] fp32, dst [n] dt
void to_16bit_cuda(int64_t n, DType dt, const float* src, void* dst, cudaStream_t stream);
// dst = src (DType::F16 or BF16) widened to fp32 (exact).         src [n] dt, dst [n] fp32
void from_16bit_cuda(int64_t n, DType dt, const void* src, float* dst, cudaStream_t stream);

}  // namespace lockstep::ops
