// Pooling kernels on the GPU. Grids are [items, chunks of an item]: block x is
// the item, so no thread divides by the item size; within an item indices are
// ints (argmax is int32, so items hold fewer than 2^31 elements). An item is a
// plane [h, w] in NCHW, an image [h, w, c] in NHWC (the kernels' kNhwc
// instances): there thread j of an item takes pixel j / c, channel j % c, so
// consecutive threads read consecutive channels (coalesced), and a pixel's
// element sits at pixel * c + channel.
// Forward: one thread per output. Backward: one thread per input element,
// gathering from the outputs whose window covers it, in ascending output
// order: the CPU's scatter adds in exactly that order, so results are bitwise
// the CPU's (in either layout: the CPU's NHWC kernels keep the NCHW order).
// Max-pool windows that tile the input (k == stride, no padding, no leftover
// rows or columns) take a scatter instead: one thread per output writes its
// window (NHWC: 16 bytes of channels at a time when C and the pointers allow),
// with the same bits. The NHWC max-pool forward also takes 16 bytes of
// channels per thread when C and the pointers allow, with the same bits.
// NHWC global average pooling: one thread per (image, channel) sums the hw
// positions in order in double, exactly the CPU's sum, so it is bitwise too.
// The kernels are templated on the storage type T of x, y, dy, dx (float,
// __nv_bfloat16 or __half, cuda/float16.cuh): values are widened exactly to
// fp32 on load, compared and summed in fp32 (global average pooling: double) in
// registers exactly as in the fp32 instance, and each output is stored once
// (16-bit: rounded once, nearest even). Each entry point picks the instance
// from its DType (cuda::dispatch_storage).
#include "ops/pool/pool2d_cuda.h"

#include <algorithm>
#include <climits>
#include <string>

#include "core/throw.h"
#include "cuda/float16.cuh"
#include "cuda/check.h"
#include "cuda/launch.cuh"
#include "cuda/pack.cuh"

namespace lockstep::ops {
namespace {

using cuda::kThreads;
using cuda::load;
using cuda::store;

struct PlaneGrid {
  dim3 grid, block;
};
// Block x: plane; block y: chunk of `len` elements within it.
PlaneGrid plane_grid(int64_t planes, int64_t len) {
  const int threads = static_cast<int>(std::clamp<int64_t>((len + 31) / 32 * 32, 32, kThreads));
  const int64_t chunks = (len + threads - 1) / threads;
  LS_REQUIRE(planes <= INT_MAX && chunks <= 65535,
             "pooling (cuda): " + std::to_string(planes) + " planes of " + std::to_string(len) + " is too large");
  return {dim3(static_cast<unsigned>(planes), static_cast<unsigned>(chunks)), dim3(static_cast<unsigned>(threads))};
}

// Plain ints for the kernels (all checked to fit). c: the channels of an NHWC
// image (1 for NCHW, whose items are single planes).
struct Geometry {
  int h, w, k, stride, pad, oh, ow, c;
};

// The checked geometry and the number of items (planes, or NHWC images).
struct Checked {
  Geometry g;
  int64_t items;
  bool nhwc;
};

Checked check_shape(const Pool2dShape& s, const char* op) {
  const std::string name = std::string(op) + " (cuda): ";
  LS_REQUIRE(s.planes >= 0 && s.h > 0 && s.w > 0 && s.k > 0 && s.stride > 0 && s.pad >= 0 && s.oh >= 0 &&
                 s.ow >= 0,
             name + "invalid shape");
  const bool nhwc = s.layout == Layout::NHWC;
  if (nhwc)
    LS_REQUIRE(s.c >= 1 && s.planes % s.c == 0, name + "nhwc: " + std::to_string(s.planes) +
                                                    " planes are not a whole number of images of " +
                                                    std::to_string(s.c) + " channels");
  const int64_t c = nhwc ? s.c : 1;
  LS_REQUIRE(c <= INT_MAX && s.h * s.w <= INT_MAX / c && s.oh * s.ow <= INT_MAX / c && s.k <= INT_MAX &&
                 s.stride <= INT_MAX,
             name + (nhwc ? "an image" : "a plane") + " must hold fewer than 2^31 elements");
  // The output size the CPU layer computes (floor mode).
  LS_REQUIRE(s.oh == (s.h + 2 * s.pad - s.k) / s.stride + 1 && s.ow == (s.w + 2 * s.pad - s.k) / s.stride + 1,
             name + "output size does not match the input, kernel, stride and padding");
  const Geometry g{static_cast<int>(s.h),  static_cast<int>(s.w),   static_cast<int>(s.k),
                   static_cast<int>(s.stride), static_cast<int>(s.pad), static_cast<int>(s.oh),
                   static_cast<int>(s.ow), static_cast<int>(c)};
  return {g, nhwc ? s.planes / c : s.planes, nhwc};
}

// Thread j of an item: pixel p (within the plane) and its first channel ch of
// V (cuda/pack.cuh; V > 1 only in NHWC, with V dividing c). NCHW: p = j,
// ch = 0; NHWC: consecutive threads take consecutive channels, V at a time.
template <bool kNhwc, int V = 1>
__device__ inline void split(int j, int c, int& p, int& ch) {
  if constexpr (kNhwc) {
    const int lanes = c / V;
    p = j / lanes;
    ch = (j - p * lanes) * V;
  } else {
    p = j;
    ch = 0;
  }
}

// Outputs o (along one axis) whose window [o*stride - pad, o*stride - pad + k)
// covers input coordinate i: ceil((i + pad - k + 1) / stride) <= o <= (i + pad) / stride,
// within [0, n). Returns [first, last] (empty when first > last).
__device__ inline void covering(int i, int k, int stride, int pad, int n, int& first, int& last) {
  const int lo = i + pad - k + 1;
  first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  last = min(n - 1, (i + pad) / stride);
}

// x [planes, h, w] -> y, argmax [planes, oh, ow] (NHWC: x [n, h, w, c] -> y,
// argmax [n, oh, ow, c]). The window clipped to the input; the first maximum
// in row-major order wins (strict >), as on the CPU; argmax is the pixel index
// iy * w + ix in either layout. A thread takes V channels of one output pixel
// (NHWC, 16 bytes' worth when C and the pointers allow; else 1), each
// compared on its own: the same y and argmax whatever V.
template <typename T, bool kNhwc, int V>
__global__ void maxpool_forward_kernel(Geometry g, const T* x, T* y, int32_t* argmax) {
  using P = cuda::Pack<T, V>;
  const int cs = kNhwc ? g.c : 1;  // distance between a channel's neighbouring pixels
  const int j = static_cast<int>(blockIdx.y * blockDim.x + threadIdx.x);
  if (j >= g.oh * g.ow * (cs / V)) return;
  int p, ch;
  split<kNhwc, V>(j, g.c, p, ch);
  const int64_t item = blockIdx.x;
  const T* xp = x + item * g.h * g.w * cs + ch;
  const int oy = p / g.ow, ox = p - oy * g.ow;
  const int y0 = max(oy * g.stride - g.pad, 0), y1 = min(oy * g.stride - g.pad + g.k, g.h);
  const int x0 = max(ox * g.stride - g.pad, 0), x1 = min(ox * g.stride - g.pad + g.k, g.w);
  float best[V];
  int bi[V];
  const P first = *reinterpret_cast<const P*>(xp + static_cast<int64_t>(y0 * g.w + x0) * cs);
#pragma unroll
  for (int e = 0; e < V; ++e) {
    best[e] = load(first.e, e);
    bi[e] = y0 * g.w + x0;
  }
  for (int iy = y0; iy < y1; ++iy)
    for (int ix = x0; ix < x1; ++ix) {
      const P v = *reinterpret_cast<const P*>(xp + static_cast<int64_t>(iy * g.w + ix) * cs);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const float f = load(v.e, e);
        if (f > best[e]) {
          best[e] = f;
          bi[e] = iy * g.w + ix;
        }
      }
    }
  const int64_t o = (item * g.oh * g.ow + p) * cs + ch;
  P out;
#pragma unroll
  for (int e = 0; e < V; ++e) store(out.e, e, best[e]);  // input values: exact in T
  *reinterpret_cast<P*>(y + o) = out;
  if constexpr (V % 4 == 0) {  // 16 bytes of argmax at a time
    using I = cuda::Pack<int32_t>;
#pragma unroll
    for (int q = 0; q < V; q += I::kV) {
      I a;
#pragma unroll
      for (int e = 0; e < I::kV; ++e) a.e[e] = bi[q + e];
      *reinterpret_cast<I*>(argmax + o + q) = a;
    }
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) argmax[o + e] = bi[e];
  }
}

// dx[i] = sum of dy[o] over outputs o (ascending) with argmax[o] == i, summed
// in an fp32 register and stored once (overlapping windows: a 16-bit T rounds
// the total once, not each partial sum).
template <typename T, bool kNhwc>
__global__ void maxpool_backward_kernel(Geometry g, const T* dy, const int32_t* argmax, T* dx) {
  const int cs = kNhwc ? g.c : 1;
  const int j = static_cast<int>(blockIdx.y * blockDim.x + threadIdx.x);
  if (j >= g.h * g.w * cs) return;
  int i, ch;  // i: the input pixel, iy * w + ix
  split<kNhwc>(j, g.c, i, ch);
  const int64_t item = blockIdx.x;
  const T* dyp = dy + item * g.oh * g.ow * cs + ch;
  const int32_t* ap = argmax + item * g.oh * g.ow * cs + ch;
  const int iy = i / g.w, ix = i - iy * g.w;
  int oy0, oy1, ox0, ox1;
  covering(iy, g.k, g.stride, g.pad, g.oh, oy0, oy1);
  covering(ix, g.k, g.stride, g.pad, g.ow, ox0, ox1);
  float acc = 0.f;  // the CPU zero-fills dx, then adds
  for (int oy = oy0; oy <= oy1; ++oy)
    for (int ox = ox0; ox <= ox1; ++ox) {
      const int o = (oy * g.ow + ox) * cs;
      if (ap[o] == i) acc += load(dyp, o);
    }
  store(dx, item * g.h * g.w * cs + j, acc);
}

// Windows that tile the input (k == stride, no padding, h == oh * k and
// w == ow * k, as convnet's 2x2 pools): every input element lies in exactly
// one window, so dx is that window's dy at its argmax and zero elsewhere. One
// thread per output pixel and V channels (as the forward) writes its window's
// k * k inputs, with the value the gather above stores: 0 + dy (the CPU's
// zero-fill then add; -0 becomes +0), rounded once. The gather reads dy and
// argmax once per input element and divides per element; this reads them
// once per output.
template <typename T, bool kNhwc, int V>
__global__ void maxpool_backward_tiled_kernel(Geometry g, const T* dy, const int32_t* argmax, T* dx) {
  using P = cuda::Pack<T, V>;
  const int cs = kNhwc ? g.c : 1;
  const int j = static_cast<int>(blockIdx.y * blockDim.x + threadIdx.x);
  if (j >= g.oh * g.ow * (cs / V)) return;
  int p, ch;
  split<kNhwc, V>(j, g.c, p, ch);
  const int64_t item = blockIdx.x;
  const int64_t o = (item * g.oh * g.ow + p) * cs + ch;
  const P dyv = *reinterpret_cast<const P*>(dy + o);
  float v[V];
  int a[V];
#pragma unroll
  for (int e = 0; e < V; ++e) {
    v[e] = 0.f + load(dyv.e, e);
    a[e] = argmax[o + e];
  }
  const int oy = p / g.ow, ox = p - oy * g.ow;
  T* dxp = dx + item * g.h * g.w * cs + ch;
  for (int ky = 0; ky < g.k; ++ky)
    for (int kx = 0; kx < g.k; ++kx) {
      const int i = (oy * g.k + ky) * g.w + ox * g.k + kx;
      P out;
#pragma unroll
      for (int e = 0; e < V; ++e) store(out.e, e, i == a[e] ? v[e] : 0.f);
      *reinterpret_cast<P*>(dxp + static_cast<int64_t>(i) * cs) = out;
    }
}

// Average over the k x k window (no padding); the 2x2 stride-2 case pairs its
// additions as the CPU's fast path does.
template <typename T, bool kNhwc>
__global__ void avgpool_forward_kernel(Geometry g, float inv, const T* x, T* y) {
  const int cs = kNhwc ? g.c : 1;
  const int j = static_cast<int>(blockIdx.y * blockDim.x + threadIdx.x);
  if (j >= g.oh * g.ow * cs) return;
  int p, ch;
  split<kNhwc>(j, g.c, p, ch);
  const int64_t item = blockIdx.x;
  const T* xp = x + item * g.h * g.w * cs + ch;
  const int oy = p / g.ow, ox = p - oy * g.ow;
  float v;
  if (g.k == 2 && g.stride == 2) {
    const T* r0 = xp + (2 * oy * g.w + 2 * ox) * cs;
    const T* r1 = r0 + g.w * cs;
    v = 0.25f * ((load(r0, 0) + load(r0, cs)) + (load(r1, 0) + load(r1, cs)));
  } else {
    float acc = 0.f;
    for (int ky = 0; ky < g.k; ++ky) {
      const T* r = xp + ((oy * g.stride + ky) * g.w + ox * g.stride) * cs;
      for (int kx = 0; kx < g.k; ++kx) acc += load(r, kx * cs);
    }
    v = acc * inv;
  }
  store(y, item * g.oh * g.ow * cs + j, v);
}

// dx[i] = sum over covering outputs o (ascending) of dy[o] * inv, each product
// rounded before the add (__fmul_rn: no fused multiply-add), as on the CPU.
template <typename T, bool kNhwc>
__global__ void avgpool_backward_kernel(Geometry g, float inv, const T* dy, T* dx) {
  const int cs = kNhwc ? g.c : 1;
  const int j = static_cast<int>(blockIdx.y * blockDim.x + threadIdx.x);
  if (j >= g.h * g.w * cs) return;
  int i, ch;
  split<kNhwc>(j, g.c, i, ch);
  const int64_t item = blockIdx.x;
  const T* dyp = dy + item * g.oh * g.ow * cs + ch;
  const int iy = i / g.w, ix = i - iy * g.w;
  float acc;
  if (g.k == 2 && g.stride == 2) {  // the CPU's fast path assigns 0.25 * dy (or 0 past the last window)
    const int oy = iy / 2, ox = ix / 2;
    acc = oy < g.oh && ox < g.ow ? 0.25f * load(dyp, (oy * g.ow + ox) * cs) : 0.f;
  } else {
    int oy0, oy1, ox0, ox1;
    covering(iy, g.k, g.stride, 0, g.oh, oy0, oy1);
    covering(ix, g.k, g.stride, 0, g.ow, ox0, ox1);
    acc = 0.f;
    for (int oy = oy0; oy <= oy1; ++oy)
      for (int ox = ox0; ox <= ox1; ++ox) acc += __fmul_rn(load(dyp, (oy * g.ow + ox) * cs), inv);
  }
  store(dx, item * g.h * g.w * cs + j, acc);
}

// One warp per plane: lanes stride the plane in double, then a fixed shuffle
// tree; y = (float)(sum * (1.0 / hw)) as on the CPU (16-bit T: that fp32
// value, rounded once more on store).
constexpr int kWarpsPerBlock = kThreads / 32;
template <typename T>
__global__ void global_avgpool_forward_kernel(int64_t planes, int64_t hw, double inv, const T* x, T* y) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t p = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (p >= planes) return;  // whole warps leave together
  const T* xp = x + p * hw;
  double acc = 0;
  for (int64_t i = lane; i < hw; i += 32) acc += load(xp, i);
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if (lane == 0) store(y, p, static_cast<float>(acc * inv));
}

// dx [planes, hw] = dy[p] * inv
template <typename T>
__global__ void global_avgpool_backward_kernel(int64_t hw, float inv, const T* dy, T* dx) {
  const int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (i >= hw) return;
  const int64_t p = blockIdx.x;
  store(dx, p * hw + i, load(dy, p) * inv);
}

// NHWC, x [n, hw, c] -> y [n, c]: grid [n, chunks of c], one thread per
// channel (consecutive threads, consecutive channels: coalesced) sums its hw
// values in order in double, as the CPU does: bitwise the CPU's fp32 result.
template <typename T>
__global__ void global_avgpool_nhwc_forward_kernel(int c, int64_t hw, double inv, const T* x, T* y) {
  const int ch = static_cast<int>(blockIdx.y * blockDim.x + threadIdx.x);
  if (ch >= c) return;
  const int64_t img = blockIdx.x;
  const T* xp = x + img * hw * c + ch;
  double acc = 0;
  for (int64_t i = 0; i < hw; ++i) acc += load(xp, i * c);
  store(y, img * c + ch, static_cast<float>(acc * inv));
}

// NHWC, dx [n, hw, c] = dy[n, c] * inv: grid [n, chunks of hw * c].
template <typename T>
__global__ void global_avgpool_nhwc_backward_kernel(int c, int len, float inv, const T* dy, T* dx) {
  const int j = static_cast<int>(blockIdx.y * blockDim.x + threadIdx.x);
  if (j >= len) return;
  const int64_t img = blockIdx.x;
  store(dx, img * len + j, load(dy, img * c + j % c) * inv);
}


// The host side picks the layout's kernel instance; items and element counts
// per item come from check_shape (c = 1 for NCHW).
template <typename T>
void maxpool_forward(const Pool2dShape& s, const T* x, T* y, int32_t* argmax, cudaStream_t stream) {
  const Checked k = check_shape(s, "maxpool2d_forward");
  LS_REQUIRE(2 * s.pad <= s.k, "maxpool2d_forward (cuda): padding larger than half the kernel");
  if (k.items == 0 || s.oh * s.ow == 0) return;
  constexpr int kV = cuda::Pack<T>::kV;
  if (k.nhwc && cuda::packable<T>(k.g.c, {x, y, argmax})) {
    const PlaneGrid pg = plane_grid(k.items, s.oh * s.ow * (k.g.c / kV));
    maxpool_forward_kernel<T, true, kV><<<pg.grid, pg.block, 0, stream>>>(k.g, x, y, argmax);
  } else {
    const PlaneGrid pg = plane_grid(k.items, s.oh * s.ow * k.g.c);
    if (k.nhwc)
      maxpool_forward_kernel<T, true, 1><<<pg.grid, pg.block, 0, stream>>>(k.g, x, y, argmax);
    else
      maxpool_forward_kernel<T, false, 1><<<pg.grid, pg.block, 0, stream>>>(k.g, x, y, argmax);
  }
  LS_CUDA_CHECK_LAUNCH();
}

template <typename T>
void maxpool_backward(const Pool2dShape& s, const T* dy, const int32_t* argmax, T* dx, cudaStream_t stream) {
  const Checked k = check_shape(s, "maxpool2d_backward");
  if (k.items == 0) return;
  const bool tiled = s.pad == 0 && s.k == s.stride && s.h == s.oh * s.k && s.w == s.ow * s.k;
  constexpr int kV = cuda::Pack<T>::kV;
  if (tiled && k.nhwc && cuda::packable<T>(k.g.c, {dy, dx})) {
    const PlaneGrid pg = plane_grid(k.items, s.oh * s.ow * (k.g.c / kV));
    maxpool_backward_tiled_kernel<T, true, kV><<<pg.grid, pg.block, 0, stream>>>(k.g, dy, argmax, dx);
    LS_CUDA_CHECK_LAUNCH();
    return;
  }
  if (tiled) {
    const PlaneGrid pg = plane_grid(k.items, s.oh * s.ow * k.g.c);
    if (k.nhwc)
      maxpool_backward_tiled_kernel<T, true, 1><<<pg.grid, pg.block, 0, stream>>>(k.g, dy, argmax, dx);
    else
      maxpool_backward_tiled_kernel<T, false, 1><<<pg.grid, pg.block, 0, stream>>>(k.g, dy, argmax, dx);
    LS_CUDA_CHECK_LAUNCH();
    return;
  }
  const PlaneGrid pg = plane_grid(k.items, s.h * s.w * k.g.c);
  if (k.nhwc)
    maxpool_backward_kernel<T, true><<<pg.grid, pg.block, 0, stream>>>(k.g, dy, argmax, dx);
  else
    maxpool_backward_kernel<T, false><<<pg.grid, pg.block, 0, stream>>>(k.g, dy, argmax, dx);
  LS_CUDA_CHECK_LAUNCH();
}

template <typename T>
void avgpool_forward(const Pool2dShape& s, const T* x, T* y, cudaStream_t stream) {
  const Checked k = check_shape(s, "avgpool2d_forward");
  LS_REQUIRE(s.pad == 0, "avgpool2d_forward (cuda): average pooling has no padding");
  if (k.items == 0 || s.oh * s.ow == 0) return;
  const float inv = 1.f / static_cast<float>(s.k * s.k);
  const PlaneGrid pg = plane_grid(k.items, s.oh * s.ow * k.g.c);
  if (k.nhwc)
    avgpool_forward_kernel<T, true><<<pg.grid, pg.block, 0, stream>>>(k.g, inv, x, y);
  else
    avgpool_forward_kernel<T, false><<<pg.grid, pg.block, 0, stream>>>(k.g, inv, x, y);
  LS_CUDA_CHECK_LAUNCH();
}

template <typename T>
void avgpool_backward(const Pool2dShape& s, const T* dy, T* dx, cudaStream_t stream) {
  const Checked k = check_shape(s, "avgpool2d_backward");
  LS_REQUIRE(s.pad == 0, "avgpool2d_backward (cuda): average pooling has no padding");
  if (k.items == 0) return;
  const float inv = 1.f / static_cast<float>(s.k * s.k);
  const PlaneGrid pg = plane_grid(k.items, s.h * s.w * k.g.c);
  if (k.nhwc)
    avgpool_backward_kernel<T, true><<<pg.grid, pg.block, 0, stream>>>(k.g, inv, dy, dx);
  else
    avgpool_backward_kernel<T, false><<<pg.grid, pg.block, 0, stream>>>(k.g, inv, dy, dx);
  LS_CUDA_CHECK_LAUNCH();
}

template <typename T>
void global_avgpool_forward(int64_t planes, int64_t hw, const T* x, T* y, cudaStream_t stream) {
  LS_REQUIRE(planes >= 0 && hw > 0, "global_avgpool_forward (cuda): invalid shape");
  if (planes == 0) return;
  const int64_t blocks = (planes + kWarpsPerBlock - 1) / kWarpsPerBlock;
  LS_REQUIRE(blocks <= INT_MAX, "global_avgpool_forward (cuda): too many planes");
  const double inv = 1.0 / static_cast<double>(hw);
  global_avgpool_forward_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(planes, hw, inv, x, y);
  LS_CUDA_CHECK_LAUNCH();
}

template <typename T>
void global_avgpool_backward(int64_t planes, int64_t hw, const T* dy, T* dx, cudaStream_t stream) {
  LS_REQUIRE(planes >= 0 && hw > 0, "global_avgpool_backward (cuda): invalid shape");
  if (planes == 0) return;
  const float inv = 1.f / static_cast<float>(hw);
  const PlaneGrid pg = plane_grid(planes, hw);
  global_avgpool_backward_kernel<T><<<pg.grid, pg.block, 0, stream>>>(hw, inv, dy, dx);
  LS_CUDA_CHECK_LAUNCH();
}

template <typename T>
void global_avgpool_nhwc_forward(int64_t n, int64_t c, int64_t hw, const T* x, T* y, cudaStream_t stream) {
  LS_REQUIRE(n >= 0 && c >= 0 && hw > 0, "global_avgpool_nhwc_forward (cuda): invalid shape");
  if (n == 0 || c == 0) return;
  const PlaneGrid pg = plane_grid(n, c);  // c < 65536 * kThreads: fits an int
  const double inv = 1.0 / static_cast<double>(hw);
  global_avgpool_nhwc_forward_kernel<T>
      <<<pg.grid, pg.block, 0, stream>>>(static_cast<int>(c), hw, inv, x, y);
  LS_CUDA_CHECK_LAUNCH();
}

template <typename T>
void global_avgpool_nhwc_backward(int64_t n, int64_t c, int64_t hw, const T* dy, T* dx, cudaStream_t stream) {
  LS_REQUIRE(n >= 0 && c >= 0 && hw > 0, "global_avgpool_nhwc_backward (cuda): invalid shape");
  if (n == 0 || c == 0) return;
  LS_REQUIRE(hw <= INT_MAX / c, "global_avgpool_nhwc_backward (cuda): an image must hold fewer than 2^31 elements");
  const PlaneGrid pg = plane_grid(n, hw * c);
  const float inv = 1.f / static_cast<float>(hw);
  global_avgpool_nhwc_backward_kernel<T>
      <<<pg.grid, pg.block, 0, stream>>>(static_cast<int>(c), static_cast<int>(hw * c), inv, dy, dx);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace

// The entry points: dispatch_storage checks dt (throws unless F32, BF16 or
// F16) and runs the lambda with T = float, __nv_bfloat16 or __half; the
// templates above check the shape, return early when there is nothing to do
// and check the launch.
void maxpool2d_forward_cuda(DType dt, const Pool2dShape& s, const void* x, void* y, int32_t* argmax,
                               cudaStream_t stream) {
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    maxpool_forward(s, static_cast<const T*>(x), static_cast<T*>(y), argmax, stream);
  });
}

void maxpool2d_backward_cuda(DType dt, const Pool2dShape& s, const void* dy, const int32_t* argmax, void* dx,
                                cudaStream_t stream) {
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    maxpool_backward(s, static_cast<const T*>(dy), argmax, static_cast<T*>(dx), stream);
  });
}

void avgpool2d_forward_cuda(DType dt, const Pool2dShape& s, const void* x, void* y, cudaStream_t stream) {
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    avgpool_forward(s, static_cast<const T*>(x), static_cast<T*>(y), stream);
  });
}

void avgpool2d_backward_cuda(DType dt, const Pool2dShape& s, const void* dy, void* dx, cudaStream_t stream) {
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    avgpool_backward(s, static_cast<const T*>(dy), static_cast<T*>(dx), stream);
  });
}

void global_avgpool_forward_cuda(DType dt, int64_t planes, int64_t hw, const void* x, void* y,
                                    cudaStream_t stream) {
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    global_avgpool_forward(planes, hw, static_cast<const T*>(x), static_cast<T*>(y), stream);
  });
}

void global_avgpool_backward_cuda(DType dt, int64_t planes, int64_t hw, const void* dy, void* dx,
                                     cudaStream_t stream) {
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    global_avgpool_backward(planes, hw, static_cast<const T*>(dy), static_cast<T*>(dx), stream);
  });
}

void global_avgpool_nhwc_forward_cuda(DType dt, int64_t n, int64_t c, int64_t hw, const void* x, void* y,
                                         cudaStream_t stream) {
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    global_avgpool_nhwc_forward(n, c, hw, static_cast<const T*>(x), static_cast<T*>(y), stream);
  });
}

void global_avgpool_nhwc_backward_cuda(DType dt, int64_t n, int64_t c, int64_t hw, const void* dy, void* dx,
                                          cudaStream_t stream) {
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    global_avgpool_nhwc_backward(n, c, hw, static_cast<const T*>(dy), static_cast<T*>(dx), stream);
  });
}

}  // namespace lockstep::ops
