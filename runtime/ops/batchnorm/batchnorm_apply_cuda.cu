// Batch normalisation's elementwise passes on the GPU: y = x * scale + shift
// (with the fused ReLU, or the residual join's add + ReLU), and
// dx = a * dy + b * x + d, per element with per-channel fp32 coefficients
// (ops/batchnorm/batchnorm_cuda.h). Templated on the activations' storage type T
// (float, __nv_bfloat16 or __half, through cuda::load/store): loads widen
// exactly, the arithmetic is fp32, 16-bit stores round once. NCHW runs a
// grid of planes; channels-last ([N*H*W, C, 1]) a flat grid-stride loop,
// 16 bytes per thread where C and alignment allow.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "core/throw.h"
#include "cuda/check.h"
#include "cuda/float16.cuh"
#include "cuda/launch.cuh"
#include "cuda/pack.cuh"
#include "ops/batchnorm/batchnorm_cuda.h"

namespace lockstep::ops {
namespace {

using cuda::kThreads;
using cuda::Pack;
using cuda::packable;
using cuda::load;
using cuda::store;

void check_shape(const BatchNormShape& s, const char* op) {
  LS_REQUIRE(s.n >= 0 && s.c > 0 && s.hw >= 0, std::string(op) + " (cuda): invalid shape");
  LS_REQUIRE(s.c <= INT_MAX, std::string(op) + " (cuda): too many channels");
}

// ---- elementwise passes: grid [N * C planes, chunks of HW] ----
struct PlaneGrid {
  dim3 grid, block;
};
PlaneGrid plane_grid(int64_t planes, int64_t len) {
  const int threads = static_cast<int>(std::clamp<int64_t>((len + 31) / 32 * 32, 32, kThreads));
  const int64_t chunks = (len + threads - 1) / threads;
  LS_REQUIRE(planes <= INT_MAX && chunks <= 65535, "batchnorm (cuda): " + std::to_string(planes) +
                                                       " planes of " + std::to_string(len) + " is too large");
  return {dim3(static_cast<unsigned>(planes), static_cast<unsigned>(chunks)), dim3(static_cast<unsigned>(threads))};
}

// T: storage of x, y (dy, dx, r); the per-channel coefficients are fp32. Each
// element is read before it is written by the same thread: y may equal x, dx dy.
// kAdd: the residual join fused in, y = max(0, (x * scale + shift) + r) in
// fp32 (the CPU's batchnorm_apply_add_relu_cpu), rounded to T once.
template <typename T, bool kAdd>
__device__ __forceinline__ float apply_value(const T* x, const T* r, int64_t i, float scale, float shift) {
  const float t = load(x, i) * scale + shift;
  if constexpr (kAdd) return t + load(r, i);
  return t;
}

template <typename T, bool kAdd>
__global__ void apply_kernel(int64_t channels, int64_t hw, const T* x, const float* scale, const float* shift,
                             const T* r, T* y, bool relu) {
  const int64_t p = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (p >= hw) return;
  const int64_t plane = blockIdx.x, c = plane % channels, i = plane * hw + p;
  const float v = apply_value<T, kAdd>(x, r, i, scale[c], shift[c]);
  store(y, i, relu ? (v > 0.f ? v : 0.f) : v);
}

template <typename T>
__global__ void backward_apply_kernel(int64_t channels, int64_t hw, const T* x, const T* dy, const float* a,
                                      const float* b, const float* d, T* dx) {
  const int64_t p = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (p >= hw) return;
  const int64_t plane = blockIdx.x, c = plane % channels, i = plane * hw + p;
  store(dx, i, a[c] * load(dy, i) + b[c] * load(x, i) + d[c]);
}

// hw == 1 (the channels-last view [N*H*W, C, 1]): one thread per element over
// a grid-stride loop, channel i % C (cuda::StrideMod). The same expressions as
// the plane kernels.
template <typename T, bool kAdd>
__global__ void apply_flat_kernel(int64_t total, int64_t channels, const T* x, const float* scale,
                                  const float* shift, const T* r, T* y, bool relu) {
  cuda::StrideMod c(channels);
  for (int64_t i = cuda::first_index(); i < total; i += cuda::grid_stride(), c.advance()) {
    const float v = apply_value<T, kAdd>(x, r, i, scale[c.value], shift[c.value]);
    store(y, i, relu ? (v > 0.f ? v : 0.f) : v);
  }
}

// The flat kernels 16 bytes at a time (cuda/pack.cuh; when C and the pointers
// allow: launch_apply/launch_backward_apply check): the same per-element
// expressions through the same load/store conversions.
template <typename T, bool kAdd>
__global__ void apply_flat_vec_kernel(int64_t vecs, int64_t channels, const T* x, const float* scale,
                                      const float* shift, const T* r, T* y, bool relu) {
  constexpr int kV = Pack<T>::kV;
  for (int64_t v = cuda::first_index(); v < vecs; v += cuda::grid_stride()) {
    const int64_t c = v * kV % channels;
    const Pack<T> xv = reinterpret_cast<const Pack<T>*>(x)[v];
    Pack<T> rv{}, yv;
    if constexpr (kAdd) rv = reinterpret_cast<const Pack<T>*>(r)[v];
#pragma unroll
    for (int e = 0; e < kV; ++e) {
      const float v_e = apply_value<T, kAdd>(xv.e, rv.e, e, scale[c + e], shift[c + e]);
      store(yv.e, e, relu ? (v_e > 0.f ? v_e : 0.f) : v_e);
    }
    reinterpret_cast<Pack<T>*>(y)[v] = yv;
  }
}

template <typename T>
__global__ void backward_apply_flat_vec_kernel(int64_t vecs, int64_t channels, const T* x, const T* dy,
                                               const float* a, const float* b, const float* d, T* dx) {
  constexpr int kV = Pack<T>::kV;
  for (int64_t v = cuda::first_index(); v < vecs; v += cuda::grid_stride()) {
    const int64_t c = v * kV % channels;
    const Pack<T> xv = reinterpret_cast<const Pack<T>*>(x)[v];
    const Pack<T> dyv = reinterpret_cast<const Pack<T>*>(dy)[v];
    Pack<T> dxv;
#pragma unroll
    for (int e = 0; e < kV; ++e) store(dxv.e, e, a[c + e] * load(dyv.e, e) + b[c + e] * load(xv.e, e) + d[c + e]);
    reinterpret_cast<Pack<T>*>(dx)[v] = dxv;
  }
}

template <typename T>
__global__ void backward_apply_flat_kernel(int64_t total, int64_t channels, const T* x, const T* dy, const float* a,
                                           const float* b, const float* d, T* dx) {
  cuda::StrideMod c(channels);
  for (int64_t i = cuda::first_index(); i < total; i += cuda::grid_stride(), c.advance())
    store(dx, i, a[c.value] * load(dy, i) + b[c.value] * load(x, i) + d[c.value]);
}

// r: the residual to add before the ReLU (relu must then be true), or null.
template <typename T>
void launch_apply(const BatchNormShape& s, const T* x, const float* scale, const float* shift, const T* r, T* y,
                  bool relu, cudaStream_t stream) {
  if (s.n == 0 || s.hw == 0) return;
  if (s.hw == 1) {
    const int64_t total = s.n * s.c;
    if (packable<T>(s.c, {x, r, y})) {
      const int64_t vecs = total / Pack<T>::kV;
      const dim3 grid(static_cast<unsigned>(cuda::blocks_for(vecs))), block(cuda::kThreads);
      if (r)
        apply_flat_vec_kernel<T, true><<<grid, block, 0, stream>>>(vecs, s.c, x, scale, shift, r, y, relu);
      else
        apply_flat_vec_kernel<T, false><<<grid, block, 0, stream>>>(vecs, s.c, x, scale, shift, r, y, relu);
      LS_CUDA_CHECK_LAUNCH();
      return;
    }
    const dim3 grid(static_cast<unsigned>(cuda::blocks_for(total))), block(cuda::kThreads);
    if (r)
      apply_flat_kernel<T, true><<<grid, block, 0, stream>>>(total, s.c, x, scale, shift, r, y, relu);
    else
      apply_flat_kernel<T, false><<<grid, block, 0, stream>>>(total, s.c, x, scale, shift, r, y, relu);
    LS_CUDA_CHECK_LAUNCH();
    return;
  }
  const PlaneGrid g = plane_grid(s.n * s.c, s.hw);
  if (r)
    apply_kernel<T, true><<<g.grid, g.block, 0, stream>>>(s.c, s.hw, x, scale, shift, r, y, relu);
  else
    apply_kernel<T, false><<<g.grid, g.block, 0, stream>>>(s.c, s.hw, x, scale, shift, r, y, relu);
  LS_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launch_backward_apply(const BatchNormShape& s, const T* x, const T* dy, const float* a, const float* b,
                           const float* d, T* dx, cudaStream_t stream) {
  if (s.n == 0 || s.hw == 0) return;
  if (s.hw == 1) {
    const int64_t total = s.n * s.c;
    if (packable<T>(s.c, {x, dy, dx})) {
      const int64_t vecs = total / Pack<T>::kV;
      backward_apply_flat_vec_kernel<T><<<cuda::blocks_for(vecs), cuda::kThreads, 0, stream>>>(vecs, s.c, x, dy, a, b,
                                                                                               d, dx);
      LS_CUDA_CHECK_LAUNCH();
      return;
    }
    backward_apply_flat_kernel<T><<<cuda::blocks_for(total), cuda::kThreads, 0, stream>>>(total, s.c, x, dy, a, b,
                                                                                          d, dx);
    LS_CUDA_CHECK_LAUNCH();
    return;
  }
  const PlaneGrid g = plane_grid(s.n * s.c, s.hw);
  backward_apply_kernel<T><<<g.grid, g.block, 0, stream>>>(s.c, s.hw, x, dy, a, b, d, dx);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace

void batchnorm_apply_cuda(DType dt, const BatchNormShape& s, const void* x, const float* scale,
                             const float* shift, void* y, bool relu, cudaStream_t stream) {
  check_shape(s, "batchnorm_apply");
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    launch_apply<T>(s, static_cast<const T*>(x), scale, shift, nullptr, static_cast<T*>(y), relu, stream);
  });
}

void batchnorm_apply_add_relu_cuda(DType dt, const BatchNormShape& s, const void* x, const float* scale,
                                      const float* shift, const void* r, void* y, cudaStream_t stream) {
  check_shape(s, "batchnorm_apply_add_relu");
  LS_REQUIRE(r != nullptr, "batchnorm_apply_add_relu (cuda): no residual");
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    launch_apply<T>(s, static_cast<const T*>(x), scale, shift, static_cast<const T*>(r), static_cast<T*>(y), true,
                    stream);
  });
}

void batchnorm_backward_apply_cuda(DType dt, const BatchNormShape& s, const void* x, const void* dy,
                                      const float* a, const float* b, const float* d, void* dx,
                                      cudaStream_t stream) {
  check_shape(s, "batchnorm_backward_apply");
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    launch_backward_apply<T>(s, static_cast<const T*>(x), static_cast<const T*>(dy), a, b, d, static_cast<T*>(dx),
                             stream);
  });
}

}  // namespace lockstep::ops
