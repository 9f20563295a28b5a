// The convolution's own kernels around cuDNN's calls (ops/conv/conv2d_epilogue_cuda.h):
// the bias + ReLU epilogue, the ReLU mask and bias gradient before backward,
// and the weight gradient's widening (and reorder) into fp32, in NCHW and NHWC.
#include "ops/conv/conv2d_epilogue_cuda.h"

#include <algorithm>
#include <climits>
#include <string>

#include "core/throw.h"
#include "cuda/channel_walk.cuh"
#include "cuda/check.h"
#include "cuda/float16.cuh"
#include "cuda/launch.cuh"
#include "cuda/pack.cuh"
#include "ops/elementwise/relu_mask.cuh"

namespace lockstep::ops {
namespace {

using cuda::kThreads;
using cuda::blocks_for;
using cuda::load;
using cuda::store;

constexpr int kUnroll = 4;

// Kernels are templated on the storage type T (float, bf16 or fp16): loads widen,
// arithmetic is fp32 (fp64 for sums), stores round once.

// y[n, c, p] = relu?(y + b[c]) (b nullable). Grid [N * OC planes, chunks of P].
template <typename T>
__global__ void bias_relu_kernel(int64_t oc, int64_t P, const float* b, bool relu, T* y) {
  const int64_t p = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (p >= P) return;
  const int64_t plane = blockIdx.x, i = plane * P + p;
  float v = load(y, i);
  if (b) v += b[plane % oc];
  store(y, i, relu ? (v > 0.f ? v : 0.f) : v);
}

// NHWC: y[m, c] = relu?(y + b[c]) (b nullable).   y [total / oc, oc]
// V channels per thread (cuda/pack.cuh): V = 16 bytes' worth when oc and y
// allow, else 1; the same per-element expression either way.
template <typename T, int V>
__global__ void bias_relu_nhwc_kernel(int64_t packs, int64_t oc, const float* b, bool relu, T* y) {
  using P = cuda::Pack<T, V>;
  cuda::StrideMod col(oc / V);  // the pack's place in its row: channels col * V ..
  for (int64_t v = cuda::first_index(); v < packs; v += cuda::grid_stride(), col.advance()) {
    const int64_t c = col.value * V;
    P yv = reinterpret_cast<const P*>(y)[v];
#pragma unroll
    for (int e = 0; e < V; ++e) {
      float x = load(yv.e, e);
      if (b) x += b[c + e];
      store(yv.e, e, relu ? (x > 0.f ? x : 0.f) : x);
    }
    reinterpret_cast<P*>(y)[v] = yv;
  }
}

// NHWC weight gradient: dw[o, c, r] = (accumulate ? dw : 0) + src[o, r, c],
// widened exactly (T: fp32 or 16-bit).   src [OC, KH*KW, C]   dw [OC, C, KH*KW]
template <typename T>
__global__ void weight_grad_from_nhwc_kernel(int64_t oc, int64_t c, int64_t khw, const T* src, float* dw,
                                             bool accumulate) {
  const int64_t total = oc * c * khw;
  for (int64_t i = cuda::first_index(); i < total; i += cuda::grid_stride()) {
    const int64_t o = i / (c * khw), rem = i - o * c * khw, ci = rem / khw, r = rem - ci * khw;
    const float g = load(src, (o * khw + r) * c + ci);
    dw[i] = accumulate ? dw[i] + g : g;
  }
}

// dw[i] = (accumulate ? dw[i] : 0) + dw16[i], widened exactly.   dw16, dw [n]
template <typename T>
__global__ void widen_grad_kernel(int64_t n, const T* dw16, float* dw, bool accumulate) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float g = load(dw16, i);
    dw[i] = accumulate ? dw[i] + g : g;
  }
}

// Bias gradient, two passes as in batchnorm_cuda.cu: block (c, s) sums slice s
// of channel c's N*P values of dy in double (applying the ReLU mask in place
// first when `relu`); then each channel's partials are added in slice order.
// partial [OC][splits]
template <typename T>
__global__ void bias_grad_partials_kernel(int64_t oc, int64_t P, int64_t m, int64_t splits, const T* __restrict__ y,
                                          T* __restrict__ dy, bool relu, double* __restrict__ partial) {
  __shared__ double sh[kThreads];
  const int64_t c = blockIdx.x, s = blockIdx.y;
  cuda::ChannelWalk<kUnroll> walk(oc, P, c, m * s / splits, m * (s + 1) / splits);
  double acc = 0;
  while (walk.more()) {
    // kUnroll offsets, then all loads, then the mask and the sums: the loads
    // are in flight together (memory-bound pass); the sum order is unchanged.
    int64_t off[kUnroll];
    bool in[kUnroll];
    walk.next(off, in);
    float g[kUnroll], yv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      g[u] = in[u] ? load(dy, off[u]) : 0.f;
      yv[u] = relu && in[u] ? load(y, off[u]) : 1.f;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (relu && in[u] && !(yv[u] > 0.f)) {
        g[u] = 0.f;
        store(dy, off[u], 0.f);
      }
      acc += g[u];
    }
  }
  sh[threadIdx.x] = acc;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width >>= 1) {
    if (static_cast<int>(threadIdx.x) < width) sh[threadIdx.x] += sh[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[c * splits + s] = sh[0];
}

// db[c] = (accumulate ? db[c] : 0) + (float)(sum of the partials in order)
__global__ void bias_grad_finish_kernel(int64_t oc, int64_t splits, const double* partial, float* db,
                                        bool accumulate) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < oc; c += stride) {
    double acc = 0;
    for (int64_t s = 0; s < splits; ++s) acc += partial[c * splits + s];
    const auto sum = static_cast<float>(acc);
    db[c] = accumulate ? db[c] + sum : sum;
  }
}

// NHWC bias gradient, first pass: dy is [m, OC] (channels contiguous). Lane
// x of block (t, s) takes V channels (cuda/pack.cuh: V = 16 bytes' worth when
// OC and the pointers allow, else 1), those of pack 32t + x (coalesced loads
// across channels), and slice s of the m rows; threadIdx.y strides over the
// slice's rows, summing each channel in double (masking dy in place first
// when `relu`; a masked pack is stored whole, its other values unchanged:
// 16-bit -> fp32 -> 16-bit is exact); the kBiasRows lanes are then added in
// lane order. Each channel's sum has the same order whatever V: the same bits
// on every run and either way. partial [OC][splits], finished by
// bias_grad_finish_kernel.
constexpr int kBiasRows = 8;
template <typename T, int V>
__global__ void bias_grad_nhwc_partials_kernel(int64_t oc, int64_t m, int64_t splits, const T* __restrict__ y,
                                               T* __restrict__ dy, bool relu, double* __restrict__ partial) {
  using P = cuda::Pack<T, V>;
  __shared__ double sh[kBiasRows][32][V];
  const int64_t packs = oc / V;
  const int64_t pk = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x, s = blockIdx.y;
  const int64_t begin = m * s / splits, end = m * (s + 1) / splits;
  double acc[V];
#pragma unroll
  for (int e = 0; e < V; ++e) acc[e] = 0;
  if (pk < packs) {
    const P* yp = reinterpret_cast<const P*>(y);
    P* dyp = reinterpret_cast<P*>(dy);
    int64_t r = begin + threadIdx.y;
    while (r < end) {
      // kUnroll rows' loads in flight together, then the mask and the sums in row order.
      P g[kUnroll], yv[kUnroll];
      bool in[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t row = r + int64_t{u} * kBiasRows;
        in[u] = row < end;
        if (in[u]) g[u] = dyp[row * packs + pk];
        if (relu && in[u]) yv[u] = yp[row * packs + pk];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        bool masked = false;
#pragma unroll
        for (int e = 0; e < V; ++e) {
          float gv = in[u] ? load(g[u].e, e) : 0.f;
          if (relu && in[u] && !(load(yv[u].e, e) > 0.f)) {
            gv = 0.f;
            store(g[u].e, e, 0.f);
            masked = true;
          }
          acc[e] += gv;
        }
        if (masked) dyp[(r + int64_t{u} * kBiasRows) * packs + pk] = g[u];
      }
      r += int64_t{kUnroll} * kBiasRows;
    }
  }
#pragma unroll
  for (int e = 0; e < V; ++e) sh[threadIdx.y][threadIdx.x][e] = acc[e];
  __syncthreads();
  if (threadIdx.y == 0 && pk < packs) {
#pragma unroll
    for (int e = 0; e < V; ++e) {
      double total = 0;
      for (int l = 0; l < kBiasRows; ++l) total += sh[l][threadIdx.x][e];
      partial[(pk * V + e) * splits + s] = total;
    }
  }
}

struct ReducePlan {
  int64_t m, splits;
};
// NHWC: enough slices of at least 256 rows to fill the device.
ReducePlan bias_grad_nhwc_plan(int64_t oc, int64_t m) {
  const int64_t tiles = (oc + 31) / 32;
  const int64_t by_work = std::max<int64_t>(1, m / 256);
  const int64_t by_grid = std::max<int64_t>(1, 1024 / tiles);
  return {m, std::min<int64_t>({by_work, by_grid, 65535})};
}
ReducePlan bias_grad_plan(int64_t oc, int64_t m) {
  const int64_t by_work = std::max<int64_t>(1, m / (int64_t{kThreads} * kUnroll * 4));
  const int64_t by_grid = std::max<int64_t>(1, 2048 / oc);
  return {m, std::min<int64_t>({by_work, by_grid, 65535})};
}


// The epilogue after cuDNN's forward: bias and ReLU, in place on y.
template <typename T>
void bias_relu(Layout layout, int64_t n, int64_t oc, int64_t P, const float* b, bool relu, T* y, cudaStream_t stream) {
  if (!b && !relu) return;
  if (layout == Layout::NHWC) {
    const int64_t total = n * P * oc;
    constexpr int kV = cuda::Pack<T>::kV;
    if (cuda::packable<T>(oc, {y}))
      bias_relu_nhwc_kernel<T, kV><<<blocks_for(total / kV), kThreads, 0, stream>>>(total / kV, oc, b, relu, y);
    else
      bias_relu_nhwc_kernel<T, 1><<<blocks_for(total), kThreads, 0, stream>>>(total, oc, b, relu, y);
    LS_CUDA_CHECK_LAUNCH();
    return;
  }
  const int threads = static_cast<int>(std::clamp<int64_t>((P + 31) / 32 * 32, 32, kThreads));
  const int64_t chunks = (P + threads - 1) / threads;
  const int64_t planes = n * oc;
  LS_REQUIRE(planes <= INT_MAX && chunks <= 65535,
             "conv2d (cuda): an output of " + std::to_string(planes) + " planes of " + std::to_string(P) +
                 " is too large for the bias kernel");
  const dim3 grid(static_cast<unsigned>(planes), static_cast<unsigned>(chunks));
  bias_relu_kernel<<<grid, threads, 0, stream>>>(oc, P, b, relu, y);
  LS_CUDA_CHECK_LAUNCH();
}

// Before cuDNN's backward: the ReLU mask on dy (in place), fused into the
// bias-gradient pass when there is one.
template <typename T>
void mask_and_bias_grad(cuda::Context& ctx, Layout layout, int64_t n, int64_t oc, int64_t P, const T* y, T* dy,
                        float* db, bool accumulate, bool relu) {
  const cudaStream_t stream = ctx.raw_stream();
  if (db && layout == Layout::NHWC) {
    const ReducePlan plan = bias_grad_nhwc_plan(oc, n * P);
    auto* partial = static_cast<double*>(ctx.workspace(static_cast<size_t>(oc * plan.splits) * sizeof(double)));
    // The same splits either way: each channel is summed in the same order.
    constexpr int kV = cuda::Pack<T>::kV;
    if (cuda::packable<T>(oc, {y, dy})) {
      const dim3 grid(static_cast<unsigned>((oc / kV + 31) / 32), static_cast<unsigned>(plan.splits));
      bias_grad_nhwc_partials_kernel<T, kV><<<grid, dim3(32, kBiasRows), 0, stream>>>(oc, plan.m, plan.splits, y, dy,
                                                                                      relu, partial);
    } else {
      const dim3 grid(static_cast<unsigned>((oc + 31) / 32), static_cast<unsigned>(plan.splits));
      bias_grad_nhwc_partials_kernel<T, 1><<<grid, dim3(32, kBiasRows), 0, stream>>>(oc, plan.m, plan.splits, y, dy,
                                                                                     relu, partial);
    }
    LS_CUDA_CHECK_LAUNCH();
    bias_grad_finish_kernel<<<blocks_for(oc), kThreads, 0, stream>>>(oc, plan.splits, partial, db, accumulate);
    LS_CUDA_CHECK_LAUNCH();
  } else if (db) {
    const ReducePlan plan = bias_grad_plan(oc, n * P);
    // Partials live in the context workspace only until the finish kernel
    // (stream order): the cuDNN calls after this may reuse the same memory.
    auto* partial = static_cast<double*>(ctx.workspace(static_cast<size_t>(oc * plan.splits) * sizeof(double)));
    const dim3 grid(static_cast<unsigned>(oc), static_cast<unsigned>(plan.splits));
    bias_grad_partials_kernel<<<grid, kThreads, 0, stream>>>(oc, P, plan.m, plan.splits, y, dy, relu, partial);
    LS_CUDA_CHECK_LAUNCH();
    bias_grad_finish_kernel<<<blocks_for(oc), kThreads, 0, stream>>>(oc, plan.splits, partial, db, accumulate);
    LS_CUDA_CHECK_LAUNCH();
  } else if (relu) {
    relu_mask_cuda(n * oc * P, y, dy, stream);
  }
}

}  // namespace

void conv_bias_relu_cuda(DType dt, Layout layout, int64_t n, int64_t oc, int64_t P, const float* b, bool relu,
                         void* y, cudaStream_t stream) {
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    bias_relu(layout, n, oc, P, b, relu, static_cast<T*>(y), stream);
  });
}

void conv_mask_and_bias_grad_cuda(cuda::Context& ctx, DType dt, Layout layout, int64_t n, int64_t oc, int64_t P,
                                  const void* y, void* dy, float* db, bool accumulate, bool relu) {
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    mask_and_bias_grad(ctx, layout, n, oc, P, static_cast<const T*>(y), static_cast<T*>(dy), db, accumulate, relu);
  });
}

void conv_weight_grad_cuda(DType dt, Layout layout, int64_t oc, int64_t c, int64_t khw, const void* src, float* dw,
                           bool accumulate, cudaStream_t stream) {
  const int64_t weights = oc * c * khw;
  if (weights == 0) return;
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* s = static_cast<const T*>(src);
    if (layout == Layout::NHWC)
      weight_grad_from_nhwc_kernel<T><<<blocks_for(weights), kThreads, 0, stream>>>(oc, c, khw, s, dw, accumulate);
    else
      widen_grad_kernel<T><<<blocks_for(weights), kThreads, 0, stream>>>(weights, s, dw, accumulate);
    LS_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace lockstep::ops
