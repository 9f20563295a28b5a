// GPU elementwise kernels (ReLU, residual adds, scaling, dropout): one
// grid-stride loop each, 256 threads per block, int64 indices. Every output
// element is computed with exactly the CPU op's expression (no multiply-add
// pairs nvcc could contract), so outputs match the CPU bitwise.
#include "ops/elementwise_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "core/throw.h"
#include "cuda/check.h"
#include "cuda/launch.cuh"
#include "ops/dropout_hash.h"

namespace lockstep::ops {
namespace {

using cuda::kThreads;
using cuda::blocks_for;
using cuda::first_index;
using cuda::grid_stride;

__global__ void relu_forward_kernel(int64_t n, const float* x, float* y) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float v = x[i];
    y[i] = v > 0.f ? v : 0.f;
  }
}

__global__ void relu_backward_kernel(int64_t n, const float* y, const float* dy, float* dx) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float g = dy[i];
    dx[i] = y[i] > 0.f ? g : 0.f;
  }
}

__global__ void add_relu_kernel(int64_t n, const float* a, const float* b, float* y) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float v = a[i] + b[i];
    y[i] = v > 0.f ? v : 0.f;
  }
}

__global__ void add_inplace_kernel(int64_t n, const float* x, float* y) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] += x[i];
}

__global__ void scale_kernel(int64_t n, float alpha, float* x) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) x[i] *= alpha;
}

// Flat over rows * row_len elements; element i is (row i / row_len, column
// i % row_len), and its keep bit depends only on (key, row0 + row, column).
__global__ void dropout_forward_kernel(int64_t n, int64_t row_len, int64_t row0, uint64_t key, uint32_t threshold,
                                       float scale, const float* x, float* y, uint8_t* mask) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t r = i / row_len;
    const int64_t e = i - r * row_len;
    const uint32_t row_key = dropout_row_key(key, static_cast<uint64_t>(row0 + r));
    const uint32_t keep = dropout_keep(row_key, e, threshold);
    const float v = x[i];
    mask[i] = static_cast<uint8_t>(keep);
    y[i] = v * (static_cast<float>(keep) * scale);
  }
}

__global__ void dropout_backward_kernel(int64_t n, float scale, const uint8_t* mask, const float* dy, float* dx) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dx[i] = dy[i] * (static_cast<float>(mask[i]) * scale);
}

__global__ void to_bf16_kernel(int64_t n, const float* src, __nv_bfloat16* dst) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void to_f16_kernel(int64_t n, const float* src, __half* dst) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dst[i] = __float2half_rn(src[i]);
}

__global__ void from_bf16_kernel(int64_t n, const __nv_bfloat16* src, float* dst) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dst[i] = __bfloat162float(src[i]);
}

__global__ void from_f16_kernel(int64_t n, const __half* src, float* dst) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dst[i] = __half2float(src[i]);
}

}  // namespace

void to_16bit_cuda(int64_t n, Float16Kind kind, const float* src, void* dst, cudaStream_t stream) {
  if (n <= 0) return;
  if (kind == Float16Kind::BF16)
    to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, src, static_cast<__nv_bfloat16*>(dst));
  else
    to_f16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, src, static_cast<__half*>(dst));
  LS_CUDA_CHECK_LAUNCH();
}

void from_16bit_cuda(int64_t n, Float16Kind kind, const void* src, float* dst, cudaStream_t stream) {
  if (n <= 0) return;
  if (kind == Float16Kind::BF16)
    from_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, static_cast<const __nv_bfloat16*>(src), dst);
  else
    from_f16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, static_cast<const __half*>(src), dst);
  LS_CUDA_CHECK_LAUNCH();
}

void relu_forward_cuda(int64_t n, const float* x, float* y, cudaStream_t stream) {
  if (n <= 0) return;
  relu_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, x, y);
  LS_CUDA_CHECK_LAUNCH();
}

void relu_backward_cuda(int64_t n, const float* y, const float* dy, float* dx, cudaStream_t stream) {
  if (n <= 0) return;
  relu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, y, dy, dx);
  LS_CUDA_CHECK_LAUNCH();
}

void add_relu_cuda(int64_t n, const float* a, const float* b, float* y, cudaStream_t stream) {
  if (n <= 0) return;
  add_relu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, a, b, y);
  LS_CUDA_CHECK_LAUNCH();
}

void add_inplace_cuda(int64_t n, const float* x, float* y, cudaStream_t stream) {
  if (n <= 0) return;
  add_inplace_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, x, y);
  LS_CUDA_CHECK_LAUNCH();
}

void scale_cuda(int64_t n, float alpha, float* x, cudaStream_t stream) {
  if (n <= 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, alpha, x);
  LS_CUDA_CHECK_LAUNCH();
}

void dropout_forward_cuda(int64_t rows, int64_t row_len, int64_t row0, uint64_t key, float p, const float* x, float* y,
                          uint8_t* mask, cudaStream_t stream) {
  if (rows <= 0 || row_len <= 0) return;
  const int64_t n = rows * row_len;
  dropout_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, row_len, row0, key, dropout_threshold(p),
                                                                  dropout_scale(p), x, y, mask);
  LS_CUDA_CHECK_LAUNCH();
}

void dropout_backward_cuda(int64_t n, float p, const uint8_t* mask, const float* dy, float* dx, cudaStream_t stream) {
  if (n <= 0) return;
  dropout_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, dropout_scale(p), mask, dy, dx);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace lockstep::ops
