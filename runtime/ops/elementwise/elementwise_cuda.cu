// GPU elementwise kernels (ReLU, residual adds, scaling, dropout, 16-bit
// conversion): one grid-stride loop each, 256 threads per block, int64
// indices. Every output element is computed with exactly the CPU op's fp32
// expression (no multiply-add pairs nvcc could contract), so fp32 outputs match
// the CPU bitwise. ReLU, the residual adds and dropout are templated on the
// storage type (float, __nv_bfloat16 or __half, cuda/float16.cuh): the 16-bit
// instances widen their inputs exactly, evaluate the same fp32 expression and
// round the result to the storage type once (nearest even); each entry
// point picks the instance from its DType (cuda::dispatch_storage).
#include "ops/elementwise/elementwise_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "core/throw.h"
#include "cuda/float16.cuh"
#include "cuda/check.h"
#include "cuda/launch.cuh"
#include "ops/elementwise/dropout_hash.h"
#include "ops/elementwise/gelu_rule.h"

namespace lockstep::ops {
namespace {

using cuda::kThreads;
using cuda::blocks_for;
using cuda::first_index;
using cuda::grid_stride;
using cuda::load;
using cuda::store;

// Kernels templated on the storage type T (float, __nv_bfloat16 or __half):
// each element is loaded (widened exactly to fp32), put through the CPU op's
// fp32 expression, and stored (rounded to T once, nearest even). With T =
// float, load and store are plain reads and writes: the fp32 kernels are the
// expressions they were.
template <typename T>
__global__ void relu_forward_kernel(int64_t n, const T* x, T* y) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float v = load(x, i);
    store(y, i, v > 0.f ? v : 0.f);
  }
}

template <typename T>
__global__ void relu_backward_kernel(int64_t n, const T* y, const T* dy, T* dx) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float g = load(dy, i);
    store(dx, i, load(y, i) > 0.f ? g : 0.f);
  }
}

template <typename T>
__global__ void add_relu_kernel(int64_t n, const T* a, const T* b, T* y) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float v = load(a, i) + load(b, i);
    store(y, i, v > 0.f ? v : 0.f);
  }
}

// y[i] += x[i]: y's value plus x's, in fp32.
template <typename T>
__global__ void add_inplace_kernel(int64_t n, const T* x, T* y) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) store(y, i, load(y, i) + load(x, i));
}

template <typename T>
__global__ void gelu_forward_kernel(int64_t n, const T* x, T* y) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) store(y, i, gelu_value(load(x, i)));
}

template <typename T>
__global__ void gelu_backward_kernel(int64_t n, const T* x, const T* dy, T* dx) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) store(dx, i, load(dy, i) * gelu_slope(load(x, i)));
}

__global__ void scale_kernel(int64_t n, float alpha, float* x) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) x[i] *= alpha;
}

// Flat over rows * row_len elements; element i is (row i / row_len, column
// i % row_len), and its keep bit depends only on (key, row0 + row, column):
// the mask does not depend on T.
template <typename T>
__global__ void dropout_forward_kernel(int64_t n, int64_t row_len, int64_t row0, uint64_t key, uint32_t threshold,
                                       float scale, const T* x, T* y, uint8_t* mask, DeviceDropoutKey dk,
                                       int64_t channels_last) {
  if (dk.step) key = dropout_stream_key(dk.seed, dk.stream, static_cast<uint64_t>(*dk.step));
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t r = i / row_len;
    int64_t e = i - r * row_len;
    if (channels_last > 0) {  // (position j, channel c) draws as logical element c * positions + j
      const int64_t j = e / channels_last;
      e = (e - j * channels_last) * (row_len / channels_last) + j;
    }
    const uint32_t row_key = dropout_row_key(key, static_cast<uint64_t>(row0 + r));
    const uint32_t keep = dropout_keep(row_key, e, threshold);
    const float v = load(x, i);
    mask[i] = static_cast<uint8_t>(keep);
    store(y, i, v * (static_cast<float>(keep) * scale));
  }
}

template <typename T>
__global__ void dropout_backward_kernel(int64_t n, float scale, const uint8_t* mask, const T* dy, T* dx) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    store(dx, i, load(dy, i) * (static_cast<float>(mask[i]) * scale));
}

template <typename T>
__global__ void to_16bit_kernel(int64_t n, const float* src, T* dst) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) cuda::store(dst, i, src[i]);
}

template <typename T>
__global__ void from_16bit_kernel(int64_t n, const T* src, float* dst) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dst[i] = cuda::load(src, i);
}

}  // namespace

void to_16bit_cuda(int64_t n, DType dt, const float* src, void* dst, cudaStream_t stream) {
  if (n <= 0) return;
  cuda::dispatch_16bit(dt, [&](auto tag) {
    using T = decltype(tag);
    to_16bit_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(n, src, static_cast<T*>(dst));
  });
  LS_CUDA_CHECK_LAUNCH();
}

void from_16bit_cuda(int64_t n, DType dt, const void* src, float* dst, cudaStream_t stream) {
  if (n <= 0) return;
  cuda::dispatch_16bit(dt, [&](auto tag) {
    using T = decltype(tag);
    from_16bit_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(n, static_cast<const T*>(src), dst);
  });
  LS_CUDA_CHECK_LAUNCH();
}

namespace {

template <typename T>
void launch_relu_forward(int64_t n, const T* x, T* y, cudaStream_t stream) {
  if (n <= 0) return;
  relu_forward_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(n, x, y);
  LS_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_relu_backward(int64_t n, const T* y, const T* dy, T* dx, cudaStream_t stream) {
  if (n <= 0) return;
  relu_backward_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(n, y, dy, dx);
  LS_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_add_relu(int64_t n, const T* a, const T* b, T* y, cudaStream_t stream) {
  if (n <= 0) return;
  add_relu_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(n, a, b, y);
  LS_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_add_inplace(int64_t n, const T* x, T* y, cudaStream_t stream) {
  if (n <= 0) return;
  add_inplace_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(n, x, y);
  LS_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_dropout_forward(int64_t rows, int64_t row_len, int64_t row0, uint64_t key, float p, const T* x, T* y,
                            uint8_t* mask, cudaStream_t stream, const DeviceDropoutKey& dk, int64_t channels_last) {
  LS_REQUIRE(channels_last >= 0 && (channels_last == 0 || row_len % channels_last == 0),
             "dropout (cuda): rows do not split into the given channels");
  if (rows <= 0 || row_len <= 0) return;
  const int64_t n = rows * row_len;
  dropout_forward_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(n, row_len, row0, key, dropout_threshold(p),
                                                                     dropout_scale(p), x, y, mask, dk, channels_last);
  LS_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_dropout_backward(int64_t n, float p, const uint8_t* mask, const T* dy, T* dx, cudaStream_t stream) {
  if (n <= 0) return;
  dropout_backward_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(n, dropout_scale(p), mask, dy, dx);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace

// One entry per op: dispatch_storage checks dt (throws unless F32, BF16 or
// F16) and runs the lambda with T = float, __nv_bfloat16 or __half; the launch
// helpers return early when there is nothing to do and check the launch.
void relu_forward_cuda(DType dt, int64_t n, const void* x, void* y, cudaStream_t stream) {
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    launch_relu_forward(n, static_cast<const T*>(x), static_cast<T*>(y), stream);
  });
}

void relu_backward_cuda(DType dt, int64_t n, const void* y, const void* dy, void* dx, cudaStream_t stream) {
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    launch_relu_backward(n, static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(dx), stream);
  });
}

void add_relu_cuda(DType dt, int64_t n, const void* a, const void* b, void* y, cudaStream_t stream) {
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    launch_add_relu(n, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y), stream);
  });
}

void add_inplace_cuda(DType dt, int64_t n, const void* x, void* y, cudaStream_t stream) {
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    launch_add_inplace(n, static_cast<const T*>(x), static_cast<T*>(y), stream);
  });
}

void gelu_forward_cuda(DType dt, int64_t n, const void* x, void* y, cudaStream_t stream) {
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    if (n <= 0) return;
    gelu_forward_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(n, static_cast<const T*>(x), static_cast<T*>(y));
    LS_CUDA_CHECK_LAUNCH();
  });
}

void gelu_backward_cuda(DType dt, int64_t n, const void* x, const void* dy, void* dx, cudaStream_t stream) {
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    if (n <= 0) return;
    gelu_backward_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(n, static_cast<const T*>(x),
                                                                    static_cast<const T*>(dy), static_cast<T*>(dx));
    LS_CUDA_CHECK_LAUNCH();
  });
}

void scale_cuda(int64_t n, float alpha, float* x, cudaStream_t stream) {
  if (n <= 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, alpha, x);
  LS_CUDA_CHECK_LAUNCH();
}

void dropout_forward_cuda(DType dt, int64_t rows, int64_t row_len, int64_t row0, uint64_t key, float p, const void* x,
                          void* y, uint8_t* mask, cudaStream_t stream, const DeviceDropoutKey& dk,
                          int64_t channels_last) {
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    launch_dropout_forward(rows, row_len, row0, key, p, static_cast<const T*>(x), static_cast<T*>(y), mask, stream,
                           dk, channels_last);
  });
}

void dropout_backward_cuda(DType dt, int64_t n, float p, const uint8_t* mask, const void* dy, void* dx,
                           cudaStream_t stream) {
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    launch_dropout_backward(n, p, mask, static_cast<const T*>(dy), static_cast<T*>(dx), stream);
  });
}

}  // namespace lockstep::ops
