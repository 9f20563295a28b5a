// Batch normalisation kernels on the GPU: per-channel reductions (two passes,
// deterministic) and the per-channel statistics and coefficient math of
// the host step, batchnorm_step_cpu.cpp (the elementwise passes: batchnorm_apply_cuda.cu). The reductions
// are templated on the activations' storage type T (float, __nv_bfloat16 or
// __half, through cuda::load/store): loads widen exactly, the arithmetic is the
// fp32 path's expression by expression, 16-bit stores round once. The entry
// points pick T from their DType at run time (cuda::dispatch_storage).
#include "ops/batchnorm/batchnorm_cuda.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "core/throw.h"
#include "cuda/float16.cuh"
#include "cuda/channel_walk.cuh"
#include "cuda/check.h"
#include "cuda/launch.cuh"
#include "cuda/pack.cuh"

namespace lockstep::ops {
namespace {

using cuda::kThreads;
using cuda::blocks_for;
using cuda::load;
using cuda::store;

constexpr int kUnroll = 4;     // values in flight per thread in the reductions

void check_shape(const BatchNormShape& s, const char* op) {
  LS_REQUIRE(s.n >= 0 && s.c > 0 && s.hw >= 0, std::string(op) + " (cuda): invalid shape");
  LS_REQUIRE(s.c <= INT_MAX, std::string(op) + " (cuda): too many channels");
}

// ---- reductions ----
// Grid [C, splits]: block (c, s) sums channel c's values j in
// [M * s / splits, M * (s + 1) / splits) (j = n * HW + p runs over the N planes
// of the channel) in double and writes one partial per output; a second kernel
// adds each channel's partials in a fixed order. `splits` depends only on C and M.
int64_t reduce_splits(int64_t channels, int64_t m) {
  const int64_t by_work = std::max<int64_t>(1, m / (int64_t{kThreads} * kUnroll * 4));  // >= 4 sweeps per block
  const int64_t by_grid = std::max<int64_t>(1, 2048 / channels);                         // ~2048 blocks in all
  return std::min<int64_t>({by_work, by_grid, 65535});
}

// The ops, in two parts: load(off, c) reads what the element at offset `off`
// of channel c contributes (all of a thread's loads are issued before any is
// used: the pass is memory-bound), add(v, off, acc) adds it, in element order.
// T is the storage type of x, y, dy (float, bf16 or half); values are widened
// to fp32 exactly on load, so every type runs the same fp32/fp64 arithmetic.
//
// Channels-last, W channels at a time (cuda/pack.cuh; W = 1 is the scalar
// case): Packs<W> holds the packs of one row's W channels the op reads,
// load_pack(i) reads pack i of them, and add_pack(p, i, c0, acc) adds channel
// c0 + e's value to acc[e * kOut + k] with add()'s expressions, writing pack i
// back where it changed it. packable(C) says whether W = 16 bytes' worth fits
// C and every pointer.
// The packed reads of an op that reads x alone (its base).
template <typename T>
struct ReadsX {
  using Elem = T;
  const T* __restrict__ x;
  template <int W>
  struct Packs {
    cuda::Pack<T, W> x;
  };
  template <int W>
  __device__ Packs<W> load_pack(int64_t i) const {
    return {reinterpret_cast<const cuda::Pack<T, W>*>(x)[i]};
  }
  bool packable(int64_t channels) const { return cuda::packable<T>(channels, {x}); }
};

template <typename T>
struct SumOp : ReadsX<T> {
  static constexpr int kOut = 1;
  struct V {
    float x;
  };
  __device__ V load_at(int64_t off, int64_t) const { return {load(this->x, off)}; }
  __device__ void add(const V& v, int64_t, double* acc) const { acc[0] += v.x; }
  template <int W>
  __device__ void add_pack(typename ReadsX<T>::template Packs<W>& p, int64_t, int64_t, double* acc) const {
#pragma unroll
    for (int e = 0; e < W; ++e) acc[e] += load(p.x.e, e);
  }
};

template <typename T>
struct CenteredSumsqOp : ReadsX<T> {
  static constexpr int kOut = 1;
  const float* mean;
  struct V {
    float d;
  };
  // fp32 deviation as on the CPU; its square exact in double
  __device__ V load_at(int64_t off, int64_t c) const { return {load(this->x, off) - mean[c]}; }
  __device__ void add(const V& v, int64_t, double* acc) const {
    acc[0] += static_cast<double>(v.d) * static_cast<double>(v.d);
  }
  template <int W>
  __device__ void add_pack(typename ReadsX<T>::template Packs<W>& p, int64_t, int64_t c0, double* acc) const {
#pragma unroll
    for (int e = 0; e < W; ++e) {
      const float d = load(p.x.e, e) - mean[c0 + e];
      acc[e] += static_cast<double>(d) * static_cast<double>(d);
    }
  }
};

template <typename T>
struct BackwardReduceOp {
  static constexpr int kOut = 2;
  using Elem = T;
  const T* __restrict__ x;
  const T* __restrict__ y;
  T* __restrict__ dy;
  const float* mean;
  bool relu;
  struct V {
    float g, y, xmu;
  };
  __device__ V load_at(int64_t off, int64_t c) const {
    return {load(dy, off), relu ? load(y, off) : 1.f, load(x, off) - mean[c]};
  }
  __device__ void add(V v, int64_t off, double* acc) const {
    if (relu && !(v.y > 0.f)) {  // the fused ReLU's mask, written back (dy is then the pre-ReLU gradient)
      v.g = 0.f;
      store(dy, off, 0.f);
    }
    acc[0] += v.g;
    acc[1] += static_cast<double>(v.g) * static_cast<double>(v.xmu);
  }

  template <int W>
  struct Packs {
    cuda::Pack<T, W> dy, y, x;
  };
  template <int W>
  __device__ Packs<W> load_pack(int64_t i) const {
    Packs<W> p;
    p.dy = reinterpret_cast<const cuda::Pack<T, W>*>(dy)[i];
    if (relu) p.y = reinterpret_cast<const cuda::Pack<T, W>*>(y)[i];
    p.x = reinterpret_cast<const cuda::Pack<T, W>*>(x)[i];
    return p;
  }
  // A masked pack is stored whole, its other values unchanged (their bits as loaded).
  template <int W>
  __device__ void add_pack(Packs<W>& p, int64_t i, int64_t c0, double* acc) const {
    bool masked = false;
#pragma unroll
    for (int e = 0; e < W; ++e) {
      float g = load(p.dy.e, e);
      const float yv = relu ? load(p.y.e, e) : 1.f;
      const float xmu = load(p.x.e, e) - mean[c0 + e];
      if (relu && !(yv > 0.f)) {
        g = 0.f;
        store(p.dy.e, e, 0.f);
        masked = true;
      }
      acc[e * 2] += g;
      acc[e * 2 + 1] += static_cast<double>(g) * static_cast<double>(xmu);
    }
    if (masked) reinterpret_cast<cuda::Pack<T, W>*>(dy)[i] = p.dy;
  }
  bool packable(int64_t channels) const { return cuda::packable<T>(channels, {dy, relu ? y : nullptr, x}); }
};

// One thread's kUnroll values of channel c at off[u] (where in[u]): every
// load issued before any is used (the pass is memory-bound), then added to
// acc in element order.
template <typename Op>
__device__ void load_then_add(const Op& op, const int64_t (&off)[kUnroll], const bool (&in)[kUnroll], int64_t c,
                              double* acc) {
  typename Op::V v[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u)
    if (in[u]) v[u] = op.load_at(off[u], c);
#pragma unroll
  for (int u = 0; u < kUnroll; ++u)
    if (in[u]) op.add(v[u], off[u], acc);
}

// partial [kOut][C][splits]
template <typename Op>
__global__ void channel_partials_kernel(int64_t channels, int64_t hw, int64_t m, int64_t splits, Op op,
                                        double* partial) {
  constexpr int K = Op::kOut;
  __shared__ double sh[K][kThreads];
  const int64_t c = blockIdx.x, s = blockIdx.y;
  cuda::ChannelWalk<kUnroll> walk(channels, hw, c, m * s / splits, m * (s + 1) / splits);
  double acc[K];
  for (int k = 0; k < K; ++k) acc[k] = 0;
  while (walk.more()) {
    int64_t off[kUnroll];
    bool in[kUnroll];
    walk.next(off, in);
    load_then_add(op, off, in, c, acc);
  }
  for (int k = 0; k < K; ++k) sh[k][threadIdx.x] = acc[k];
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width >>= 1) {
    if (static_cast<int>(threadIdx.x) < width)
      for (int k = 0; k < K; ++k) sh[k][threadIdx.x] += sh[k][threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    for (int k = 0; k < K; ++k) partial[(k * channels + c) * splits + s] = sh[k][0];
}

// out_k[c] = the sum of partial[k][c][0 .. splits): one warp per (k, c), lane
// l adding s = l, l + 32, ... in order (coalesced), then the 32 lane sums in a
// fixed shuffle tree, so the order depends only on `splits`. (One thread per
// (k, c) adding up to 1024 partials left 64 threads working for 64 channels:
// 6.7 of resnet50 bf16 NHWC's 46.6 ms a step on the H100.)
constexpr int kWarp = 32;
__global__ void channel_finish_kernel(int64_t channels, int64_t splits, int outputs, const double* partial,
                                      double* out0, double* out1) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t warps = blockDim.x / kWarp;
  const int64_t stride = warps * gridDim.x;
  // i is the same on every lane of a warp: the whole warp takes each branch.
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / kWarp; i < channels * outputs;
       i += stride) {
    const int64_t k = i / channels, c = i - k * channels;
    const double* pp = partial + i * splits;  // (k * channels + c) * splits
    double acc = 0;
    for (int64_t s = lane; s < splits; s += kWarp) acc += pp[s];
    for (int width = kWarp / 2; width > 0; width >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, width);
    if (lane == 0) (k == 0 ? out0 : out1)[c] = acc;
  }
}

// Channels-last (hw == 1: the view [N*H*W, C, 1], channel c of row j at
// j * C + c). Grid [ceil(C / W / 32), splits], blocks of 32 x kRowThreads:
// thread (tx, ty) sums the W channels of pack 32 * blockIdx.x + tx (W = 16
// bytes' worth when the op is packable, else 1) over rows begin + ty,
// begin + ty + kRowThreads, ... of its slice in double, so a warp reads 32
// neighbouring packs of one row (coalesced) where the plane kernel would read
// one channel with a stride of C. The kRowThreads sums of a channel are then
// added in ty order: the order depends only on the shape, not on W, so both
// instances give the same bits.
constexpr int kRowThreads = 8;

int64_t reduce_splits_nhwc(int64_t channels, int64_t m) {
  const int64_t tiles = (channels + 31) / 32;
  const int64_t by_work = std::max<int64_t>(1, m / (int64_t{kRowThreads} * kUnroll * 4));  // >= 4 sweeps per thread
  const int64_t by_grid = std::max<int64_t>(1, 2048 / tiles);
  return std::min<int64_t>({by_work, by_grid, 65535});
}

template <typename Op, int W>
__global__ void channel_partials_nhwc_kernel(int64_t channels, int64_t m, int64_t splits, Op op, double* partial) {
  constexpr int K = Op::kOut;
  __shared__ double sh[K][kRowThreads][32][W];
  const int64_t packs = channels / W;
  const int64_t pk = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x, s = blockIdx.y;
  const int64_t end = m * (s + 1) / splits;
  double acc[W * K];
#pragma unroll
  for (int i = 0; i < W * K; ++i) acc[i] = 0;
  if (pk < packs) {
    int64_t j = m * s / splits + threadIdx.y;
    while (j < end) {
      // kUnroll rows' loads in flight together, then the sums in row order.
      typename Op::template Packs<W> p[kUnroll];
      bool in[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t row = j + int64_t{u} * kRowThreads;
        in[u] = row < end;
        if (in[u]) p[u] = op.template load_pack<W>(row * packs + pk);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (in[u]) op.template add_pack<W>(p[u], (j + int64_t{u} * kRowThreads) * packs + pk, pk * W, acc);
      j += int64_t{kUnroll} * kRowThreads;
    }
  }
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int e = 0; e < W; ++e) sh[k][threadIdx.y][threadIdx.x][e] = acc[e * K + k];
  __syncthreads();
  if (threadIdx.y == 0 && pk < packs)
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int e = 0; e < W; ++e) {
        double t = 0;
        for (int r = 0; r < kRowThreads; ++r) t += sh[k][r][threadIdx.x][e];
        partial[(k * channels + pk * W + e) * splits + s] = t;
      }
}

template <typename Op>
void channel_reduce(cuda::Context& ctx, const BatchNormShape& s, const Op& op, double* out0, double* out1) {
  constexpr int K = Op::kOut;
  const cudaStream_t stream = ctx.raw_stream();
  const int64_t m = s.n * s.hw;
  if (m == 0) {  // no values: the sums are zero
    LS_CUDA_CHECK(cudaMemsetAsync(out0, 0, static_cast<size_t>(s.c) * sizeof(double), stream));
    if (K > 1) LS_CUDA_CHECK(cudaMemsetAsync(out1, 0, static_cast<size_t>(s.c) * sizeof(double), stream));
    return;
  }
  const bool nhwc = s.hw == 1;
  const int64_t splits = nhwc ? reduce_splits_nhwc(s.c, m) : reduce_splits(s.c, m);
  auto* partial = static_cast<double*>(ctx.workspace(static_cast<size_t>(K * s.c * splits) * sizeof(double)));
  if (nhwc) {
    constexpr int kV = cuda::Pack<typename Op::Elem>::kV;
    if (op.packable(s.c)) {
      const dim3 grid(static_cast<unsigned>((s.c / kV + 31) / 32), static_cast<unsigned>(splits));
      channel_partials_nhwc_kernel<Op, kV><<<grid, dim3(32, kRowThreads), 0, stream>>>(s.c, m, splits, op, partial);
    } else {
      const dim3 grid(static_cast<unsigned>((s.c + 31) / 32), static_cast<unsigned>(splits));
      channel_partials_nhwc_kernel<Op, 1><<<grid, dim3(32, kRowThreads), 0, stream>>>(s.c, m, splits, op, partial);
    }
  } else {
    const dim3 grid(static_cast<unsigned>(s.c), static_cast<unsigned>(splits));
    channel_partials_kernel<Op><<<grid, kThreads, 0, stream>>>(s.c, s.hw, m, splits, op, partial);
  }
  LS_CUDA_CHECK_LAUNCH();
  channel_finish_kernel<<<blocks_for(s.c * K * kWarp), kThreads, 0, stream>>>(s.c, splits, K, partial, out0, out1);
  LS_CUDA_CHECK_LAUNCH();
}

// ---- per-channel math (one thread per channel) ----
// Each line mirrors nn/batchnorm.cpp: a double where the CPU expression is in
// double (float operands promoted), a float where it is in float, every
// operation explicitly rounded (no contraction into fused multiply-adds).

__global__ void fill_count_kernel(double* count, double value) { *count = value; }

__global__ void mean_kernel(int64_t channels, const double* sum, const double* count, float* mean) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < channels; c += stride)
    mean[c] = static_cast<float>(__ddiv_rn(sum[c], *count));  // mean_[c] = float(sums_[c] / count_)
}

__global__ void finalize_stats_kernel(int64_t channels, const double* m2, const double* count_p, const float* mean,
                                      const float* gamma, const float* beta, float eps, float momentum, float* invstd,
                                      float* scale, float* shift, float* running_mean, float* running_var) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < channels; c += stride) {
    const double count = *count_p;
    // var = sums_[c] / count_
    const double var = __ddiv_rn(m2[c], count);
    // invstd_[c] = float(1.0 / std::sqrt(var + eps_))
    const float istd = static_cast<float>(__ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(var, static_cast<double>(eps)))));
    // rm = float((1.0 - momentum_) * rm + momentum_ * mean_[c]); the last product is float * float.
    const double keep = __dsub_rn(1.0, static_cast<double>(momentum));
    running_mean[c] = static_cast<float>(__dadd_rn(__dmul_rn(keep, static_cast<double>(running_mean[c])),
                                                   static_cast<double>(__fmul_rn(momentum, mean[c]))));
    // rv = float((1.0 - momentum_) * rv + momentum_ * var * count_ / (count_ - 1)), left to right.
    const double unbiased = __ddiv_rn(__dmul_rn(__dmul_rn(static_cast<double>(momentum), var), count),
                                      __dsub_rn(count, 1.0));
    running_var[c] =
        static_cast<float>(__dadd_rn(__dmul_rn(keep, static_cast<double>(running_var[c])), unbiased));
    invstd[c] = istd;
    // scale_ = gamma * invstd_, shift_ = beta - mean_ * scale_ (float)
    const float sc = __fmul_rn(gamma[c], istd);
    scale[c] = sc;
    shift[c] = __fsub_rn(beta[c], __fmul_rn(mean[c], sc));
  }
}

__global__ void eval_stats_kernel(int64_t channels, const float* running_mean, const float* running_var,
                                  const float* gamma, const float* beta, float eps, float* mean, float* invstd,
                                  float* scale, float* shift) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < channels; c += stride) {
    const float m = running_mean[c];
    // invstd_[c] = 1.f / std::sqrt(rv[c] + eps_) (float)
    const float istd = __fdiv_rn(1.f, __fsqrt_rn(__fadd_rn(running_var[c], eps)));
    mean[c] = m;
    invstd[c] = istd;
    const float sc = __fmul_rn(gamma[c], istd);
    scale[c] = sc;
    shift[c] = __fsub_rn(beta[c], __fmul_rn(m, sc));
  }
}

__global__ void param_grads_kernel(int64_t channels, const double* sum_dy, const double* sum_dy_xmu,
                                   const float* invstd, float* dgamma, float* dbeta, bool accumulate) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < channels; c += stride) {
    // g = float(sums_[C + c] * invstd_[c]), bsum = float(sums_[c])
    const float g = static_cast<float>(__dmul_rn(sum_dy_xmu[c], static_cast<double>(invstd[c])));
    const float bsum = static_cast<float>(sum_dy[c]);
    dgamma[c] = accumulate ? __fadd_rn(dgamma[c], g) : g;
    dbeta[c] = accumulate ? __fadd_rn(dbeta[c], bsum) : bsum;
  }
}

__global__ void backward_coeffs_kernel(int64_t channels, bool training, const double* sum_dy,
                                       const double* sum_dy_xmu, const double* count_p, const float* mean,
                                       const float* invstd, const float* gamma, float* a_out, float* b_out,
                                       float* d_out) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < channels; c += stride) {
    const double inv = static_cast<double>(invstd[c]);
    // a = double(gamma[c]) * invstd_[c]
    const double a = __dmul_rn(static_cast<double>(gamma[c]), inv);
    a_out[c] = static_cast<float>(a);
    if (!training) {  // the statistics were constants
      b_out[c] = 0.f;
      d_out[c] = 0.f;
      continue;
    }
    const double count = *count_p;
    const double mean_dy = __ddiv_rn(sum_dy[c], count), mean_dy_xmu = __ddiv_rn(sum_dy_xmu[c], count);
    // b = -a * double(invstd_[c]) * invstd_[c] * mean_dy_xmu, left to right
    const double b = __dmul_rn(__dmul_rn(__dmul_rn(-a, inv), inv), mean_dy_xmu);
    b_out[c] = static_cast<float>(b);
    // d = float(-a * mean_dy - b * mean_[c])
    d_out[c] = static_cast<float>(__dsub_rn(__dmul_rn(-a, mean_dy), __dmul_rn(b, static_cast<double>(mean[c]))));
  }
}

void check_channels(int64_t channels, const char* op) {
  LS_REQUIRE(channels > 0, std::string(op) + " (cuda): no channels");
}

}  // namespace

void batchnorm_sum_cuda(DType dt, cuda::Context& ctx, const BatchNormShape& s, const void* x, double* sum) {
  check_shape(s, "batchnorm_sum");
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    channel_reduce(ctx, s, SumOp<T>{{static_cast<const T*>(x)}}, sum, nullptr);
  });
}

void batchnorm_centered_sumsq_cuda(DType dt, cuda::Context& ctx, const BatchNormShape& s, const void* x,
                                      const float* mean, double* m2) {
  check_shape(s, "batchnorm_centered_sumsq");
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    channel_reduce(ctx, s, CenteredSumsqOp<T>{{static_cast<const T*>(x)}, mean}, m2, nullptr);
  });
}

void batchnorm_backward_reduce_cuda(DType dt, cuda::Context& ctx, const BatchNormShape& s, const void* x,
                                       const void* y, void* dy, bool relu, const float* mean, double* sum_dy,
                                       double* sum_dy_xmu) {
  check_shape(s, "batchnorm_backward_reduce");
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    channel_reduce(ctx, s,
                   BackwardReduceOp<T>{static_cast<const T*>(x), static_cast<const T*>(y), static_cast<T*>(dy), mean,
                                       relu},
                   sum_dy, sum_dy_xmu);
  });
}

void batchnorm_count_cuda(const BatchNormShape& s, double* count, cudaStream_t stream) {
  check_shape(s, "batchnorm_count");
  fill_count_kernel<<<1, 1, 0, stream>>>(count, static_cast<double>(s.n * s.hw));
  LS_CUDA_CHECK_LAUNCH();
}

void batchnorm_mean_cuda(int64_t channels, const double* sum, const double* count, float* mean, cudaStream_t stream) {
  check_channels(channels, "batchnorm_mean");
  mean_kernel<<<blocks_for(channels), kThreads, 0, stream>>>(channels, sum, count, mean);
  LS_CUDA_CHECK_LAUNCH();
}

void batchnorm_finalize_stats_cuda(int64_t channels, const double* m2, const double* count, const float* mean,
                                   const float* gamma, const float* beta, float eps, float momentum, float* invstd,
                                   float* scale, float* shift, float* running_mean, float* running_var,
                                   cudaStream_t stream) {
  check_channels(channels, "batchnorm_finalize_stats");
  finalize_stats_kernel<<<blocks_for(channels), kThreads, 0, stream>>>(
      channels, m2, count, mean, gamma, beta, eps, momentum, invstd, scale, shift, running_mean, running_var);
  LS_CUDA_CHECK_LAUNCH();
}

void batchnorm_eval_stats_cuda(int64_t channels, const float* running_mean, const float* running_var,
                               const float* gamma, const float* beta, float eps, float* mean, float* invstd,
                               float* scale, float* shift, cudaStream_t stream) {
  check_channels(channels, "batchnorm_eval_stats");
  eval_stats_kernel<<<blocks_for(channels), kThreads, 0, stream>>>(channels, running_mean, running_var, gamma, beta,
                                                                    eps, mean, invstd, scale, shift);
  LS_CUDA_CHECK_LAUNCH();
}

void batchnorm_param_grads_cuda(int64_t channels, const double* sum_dy, const double* sum_dy_xmu,
                                const float* invstd, float* dgamma, float* dbeta, bool accumulate,
                                cudaStream_t stream) {
  check_channels(channels, "batchnorm_param_grads");
  param_grads_kernel<<<blocks_for(channels), kThreads, 0, stream>>>(channels, sum_dy, sum_dy_xmu, invstd, dgamma,
                                                                     dbeta, accumulate);
  LS_CUDA_CHECK_LAUNCH();
}

void batchnorm_backward_coeffs_cuda(int64_t channels, bool training, const double* sum_dy, const double* sum_dy_xmu,
                                    const double* count, const float* mean, const float* invstd, const float* gamma,
                                    float* a, float* b, float* d, cudaStream_t stream) {
  check_channels(channels, "batchnorm_backward_coeffs");
  LS_REQUIRE(!training || count != nullptr, "batchnorm_backward_coeffs (cuda): training needs the count");
  backward_coeffs_kernel<<<blocks_for(channels), kThreads, 0, stream>>>(channels, training, sum_dy, sum_dy_xmu, count,
                                                                         mean, invstd, gamma, a, b, d);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace lockstep::ops
