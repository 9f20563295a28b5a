// Conv2d through cuDNN's convolution API: descriptors per layer shape and batch
// size, algorithm choice by heuristics or by timing (deterministic; fp32 FMA
// math, or bf16/fp16 on tensor cores), and own kernels for the bias + ReLU epilogue, the ReLU
// mask, the bias gradient and (16-bit) the widening of dw into fp32.
#include "ops/conv2d_cuda.h"

#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <map>
#include <string>
#include <vector>

#include "core/throw.h"
#include "cuda/float16.cuh"
#include "cuda/check.h"
#include "cuda/launch.cuh"
#include "ops/layout_cuda.h"
#include "ops/relu_mask.cuh"

namespace lockstep::ops {
namespace {

using cuda::kThreads;
using cuda::blocks_for;
using cuda::load;
using cuda::store;

constexpr int kUnroll = 4;

std::string describe(int64_t n, int64_t oc, const ConvGeometry& g) {
  return "conv2d (cuda) [" + std::to_string(n) + ", " + std::to_string(g.c) + ", " + std::to_string(g.h) + ", " +
         std::to_string(g.w) + "] -> [" + std::to_string(oc) + ", " + std::to_string(g.oh) + ", " +
         std::to_string(g.ow) + "], kernel " + std::to_string(g.kh) + "x" + std::to_string(g.kw) + " stride " +
         std::to_string(g.stride) + " pad " + std::to_string(g.pad);
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

// ---- kernels ----

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
template <typename T>
__global__ void bias_relu_nhwc_kernel(int64_t total, int64_t oc, const float* b, bool relu, T* y) {
  for (int64_t i = cuda::first_index(); i < total; i += cuda::grid_stride()) {
    float v = load(y, i);
    if (b) v += b[i % oc];
    store(y, i, relu ? (v > 0.f ? v : 0.f) : v);
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
  const int64_t end = m * (s + 1) / splits;
  const int64_t step = blockDim.x;
  int64_t j = m * s / splits + threadIdx.x;
  int64_t n = j / P, p = j - n * P;
  const int64_t dn = step / P, dp = step - dn * P;
  const int64_t plane_stride = oc * P, base = c * P;
  double acc = 0;
  while (j < end) {
    // kUnroll offsets, then all loads, then the mask and the sums: the loads
    // are in flight together (memory-bound pass); the sum order is unchanged.
    int64_t off[kUnroll];
    bool in[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      in[u] = j < end;
      off[u] = n * plane_stride + base + p;
      j += step;
      n += dn;
      p += dp;
      if (p >= P) {
        p -= P;
        ++n;
      }
    }
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

// NHWC bias gradient, first pass: dy is [m, OC] (channels contiguous). Block
// (t, s) takes channels 32t..32t+31 (threadIdx.x: coalesced loads across
// channels) and slice s of the m rows; threadIdx.y strides over the slice's
// rows, summing in double (masking dy in place first when `relu`); the
// kBiasRows lanes are then added in lane order. Fixed order: the same bits on
// every run. partial [OC][splits], finished by bias_grad_finish_kernel.
constexpr int kBiasRows = 8;
template <typename T>
__global__ void bias_grad_nhwc_partials_kernel(int64_t oc, int64_t m, int64_t splits, const T* __restrict__ y,
                                               T* __restrict__ dy, bool relu, double* __restrict__ partial) {
  __shared__ double sh[kBiasRows][32];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x, s = blockIdx.y;
  const int64_t begin = m * s / splits, end = m * (s + 1) / splits;
  double acc = 0;
  if (c < oc) {
    int64_t r = begin + threadIdx.y;
    while (r < end) {
      // kUnroll rows' loads in flight together, then the mask and the sums in row order.
      float g[kUnroll], yv[kUnroll];
      bool in[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t row = r + int64_t{u} * kBiasRows;
        in[u] = row < end;
        g[u] = in[u] ? load(dy, row * oc + c) : 0.f;
        yv[u] = relu && in[u] ? load(y, row * oc + c) : 1.f;
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (relu && in[u] && !(yv[u] > 0.f)) {
          g[u] = 0.f;
          store(dy, (r + int64_t{u} * kBiasRows) * oc + c, 0.f);
        }
        acc += g[u];
      }
      r += int64_t{kUnroll} * kBiasRows;
    }
  }
  sh[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < oc) {
    double total = 0;
    for (int l = 0; l < kBiasRows; ++l) total += sh[l][threadIdx.x];
    partial[c * splits + s] = total;
  }
}

// ---- algorithm choice ----

bool tensor_op_math(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// The first usable entry of a heuristic's list (see the header): first pass
// deterministic only, second pass any; tensor-op entries only when
// `tensor_ops` (16-bit). `workspace_size(algo, math, &bytes)` is the matching
// cudnnGet*WorkspaceSize call (16-bit: made with the entry's math type on the
// descriptor, as cuDNN returns algorithm and math type as a pair); its
// success also confirms that the algorithm supports this configuration.
template <typename Perf, typename WorkspaceSize>
bool pick(const std::vector<Perf>& perf, int returned, size_t limit, bool tensor_ops, WorkspaceSize workspace_size,
          Perf& chosen, size_t& bytes) {
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < returned; ++i) {
      const Perf& p = perf[static_cast<size_t>(i)];
      if (p.status != CUDNN_STATUS_SUCCESS || (!tensor_ops && tensor_op_math(p.mathType))) continue;
      if (pass == 0 && p.determinism != CUDNN_DETERMINISTIC) continue;
      size_t need = 0;
      if (workspace_size(p.algo, p.mathType, &need) != CUDNN_STATUS_SUCCESS || need > limit) continue;
      chosen = p;
      bytes = need;
      return true;
    }
  return false;
}

// One direction's algorithm: from the timed list when `timed` (cudnnFind*),
// else, or when the search fails or offers nothing pick() accepts (fell_back
// is then set), from the heuristic list. find/heuristic(requested, &returned,
// perf) are the matching cuDNN calls.
template <typename Perf, typename Find, typename Heuristic, typename WorkspaceSize>
bool choose_one(int max, bool timed, Find find, Heuristic heuristic, size_t limit, bool tensor_ops,
                WorkspaceSize workspace_size, Perf& chosen, size_t& bytes, bool& fell_back) {
  std::vector<Perf> perf(static_cast<size_t>(std::max(max, 1)));
  const int requested = static_cast<int>(perf.size());
  int returned = 0;
  if (timed) {
    const cudnnStatus_t st = find(requested, &returned, perf.data());
    // A candidate whose scratch cudaMalloc failed is listed as failed, but the
    // runtime keeps cudaErrorMemoryAllocation as the last error: clear it, or
    // the next launch check would report it.
    (void)cudaGetLastError();
    if (st == CUDNN_STATUS_SUCCESS && pick(perf, returned, limit, tensor_ops, workspace_size, chosen, bytes))
      return true;
    fell_back = true;
  }
  LS_CUDNN_CHECK(heuristic(requested, &returned, perf.data()));
  return pick(perf, returned, limit, tensor_ops, workspace_size, chosen, bytes);
}

cudnnDataType_t cudnn_type(ConvData d) {
  switch (d) {
    case ConvData::BF16: return CUDNN_DATA_BFLOAT16;
    case ConvData::F16: return CUDNN_DATA_HALF;
    case ConvData::F32: break;
  }
  return CUDNN_DATA_FLOAT;
}
bool is_16bit(ConvData d) { return d != ConvData::F32; }
DType dtype_16(ConvData d) { return d == ConvData::BF16 ? DType::BF16 : DType::F16; }
const char* data_name(ConvData d) { return d == ConvData::BF16 ? "bf16" : d == ConvData::F16 ? "fp16" : "fp32"; }

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

}  // namespace

namespace {

// The epilogue after cuDNN's forward: bias and ReLU, in place on y.
template <typename T>
void bias_relu(cuda::Context& ctx, Layout layout, int64_t oc, int64_t P, int64_t n, const float* b, bool relu, T* y,
               const std::string& what) {
  if (!b && !relu) return;
  if (layout == Layout::NHWC) {
    const int64_t total = n * P * oc;
    bias_relu_nhwc_kernel<<<blocks_for(total), kThreads, 0, ctx.raw_stream()>>>(total, oc, b, relu, y);
    LS_CUDA_CHECK_LAUNCH();
    return;
  }
  const int threads = static_cast<int>(std::clamp<int64_t>((P + 31) / 32 * 32, 32, kThreads));
  const int64_t chunks = (P + threads - 1) / threads;
  const int64_t planes = n * oc;
  LS_REQUIRE(planes <= INT_MAX && chunks <= 65535, what + ": output too large for the bias kernel");
  const dim3 grid(static_cast<unsigned>(planes), static_cast<unsigned>(chunks));
  bias_relu_kernel<<<grid, threads, 0, ctx.raw_stream()>>>(oc, P, b, relu, y);
  LS_CUDA_CHECK_LAUNCH();
}

// Before cuDNN's backward: the ReLU mask on dy (in place), fused into the
// bias-gradient pass when there is one.
template <typename T>
void mask_and_bias_grad(cuda::Context& ctx, Layout layout, int64_t oc, int64_t P, int64_t n, const T* y, T* dy,
                        float* db, bool accumulate, bool relu) {
  const cudaStream_t stream = ctx.raw_stream();
  if (db && layout == Layout::NHWC) {
    const ReducePlan plan = bias_grad_nhwc_plan(oc, n * P);
    auto* partial = static_cast<double*>(ctx.workspace(static_cast<size_t>(oc * plan.splits) * sizeof(double)));
    const dim3 grid(static_cast<unsigned>((oc + 31) / 32), static_cast<unsigned>(plan.splits));
    bias_grad_nhwc_partials_kernel<<<grid, dim3(32, kBiasRows), 0, stream>>>(oc, plan.m, plan.splits, y, dy, relu,
                                                                             partial);
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

// Empty batch: the parameter gradients are zero (or unchanged).
void zero_param_grads(cuda::Context& ctx, int64_t weights, int64_t oc, float* dw, float* db, bool accumulate) {
  if (accumulate) return;
  LS_CUDA_CHECK(cudaMemsetAsync(dw, 0, static_cast<size_t>(weights) * sizeof(float), ctx.raw_stream()));
  if (db) LS_CUDA_CHECK(cudaMemsetAsync(db, 0, static_cast<size_t>(oc) * sizeof(float), ctx.raw_stream()));
}

constexpr size_t kAlign = 256;  // cuDNN workspace alignment within a carved block
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

struct Conv2dCuda::Impl {
  int64_t oc = 0;
  ConvGeometry g{};
  ConvData data = ConvData::F32;
  Layout layout = Layout::NCHW;
  size_t limit = 0;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int64_t n = -1;  // the batch size the tensor descriptors and algorithms are for (-1: none yet)
  cudnnConvolutionFwdAlgo_t fwd_algo{};
  cudnnConvolutionBwdDataAlgo_t data_algo{};
  cudnnConvolutionBwdFilterAlgo_t filter_algo{};
  // 16-bit: the math type each chosen algorithm came with, set on the descriptor
  // before each call (fp32 keeps CUDNN_FMA_MATH throughout).
  cudnnMathType_t fwd_math = CUDNN_TENSOR_OP_MATH, data_math = CUDNN_TENSOR_OP_MATH,
                  filter_math = CUDNN_TENSOR_OP_MATH;
  Algorithms algos;
  // What was chosen for each batch size seen (a short last batch alternates
  // with the full one; a benchmark search runs once per size).
  struct Choice {
    cudnnConvolutionFwdAlgo_t fwd_algo{};
    cudnnConvolutionBwdDataAlgo_t data_algo{};
    cudnnConvolutionBwdFilterAlgo_t filter_algo{};
    cudnnMathType_t fwd_math = CUDNN_TENSOR_OP_MATH, data_math = CUDNN_TENSOR_OP_MATH,
                    filter_math = CUDNN_TENSOR_OP_MATH;
    Algorithms algos;
    bool provisional = false;  // heuristics standing in for a search inside a capture: not cached
  };
  std::map<int64_t, Choice> chosen_for;

  ~Impl() {
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
  }

  // Either precision's forward, after the caller checked the precision (T: y's storage).
  template <typename T>
  void forward(cuda::Context& ctx, int64_t batch, const void* xp, const void* wp, const float* b, T* yp, bool relu) {
    LS_REQUIRE(batch >= 0, describe(batch) + ": negative batch size");
    if (batch == 0) return;
    prepare(ctx, batch);
    const float one = 1.f, zero = 0.f;  // alpha and beta are fp32 for every non-double configuration
    // NHWC: one workspace block, the weight reordered to [OC, KH, KW, C] first, then cuDNN's scratch.
    const size_t wbytes = weight_scratch_bytes(sizeof(T));
    char* block = static_cast<char*>(ctx.workspace(wbytes + algos.forward_bytes));
    void* ws = block + wbytes;
    if (layout == Layout::NHWC) wp = weight_to_nhwc(ctx, wp, block);
    if (is_16bit(data)) LS_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, fwd_math));
    LS_CUDNN_CHECK(cudnnConvolutionForward(ctx.cudnn(), &one, x, xp, w, wp, conv, fwd_algo, ws, algos.forward_bytes,
                                           &zero, y, yp));
    bias_relu(ctx, layout, oc, g.oh * g.ow, batch, b, relu, yp, describe(batch));
  }

  // NHWC: bytes of a reordered weight (or its gradient) in elements of `elem`
  // bytes at the start of a workspace block; NCHW: none.
  size_t weight_scratch_bytes(size_t elem) const {
    return layout == Layout::NHWC ? aligned(static_cast<size_t>(oc * g.k()) * elem) : 0;
  }
  // The weight [OC, C, KH, KW] at `wp` reordered into [OC, KH, KW, C] at `dst`
  // (the filter format of an NHWC descriptor); returns dst.
  const void* weight_to_nhwc(cuda::Context& ctx, const void* wp, void* dst) const {
    nchw_to_nhwc_cuda(is_16bit(data) ? dtype_16(data) : DType::F32, oc, g.c, g.kh * g.kw, wp, dst,
                      ctx.raw_stream());
    return dst;
  }

  std::string describe(int64_t batch) const { return ::lockstep::ops::describe(batch, oc, g); }

  // Descriptors and algorithms for batch size `batch` > 0.
  void prepare(cuda::Context& ctx, int64_t batch) {
    LS_REQUIRE(batch > 0, describe(batch) + ": batch size must be positive");
    if (batch == n) return;
    n = -1;  // until everything below has succeeded
    LS_REQUIRE(fits_int(batch) && fits_int(batch * g.c * g.h * g.w) && fits_int(batch * oc * g.oh * g.ow),
               describe(batch) + ": tensors must hold fewer than 2^31 elements");
    const cudnnDataType_t type = cudnn_type(data);
    const cudnnTensorFormat_t format = layout == Layout::NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    LS_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, format, type, static_cast<int>(batch),
                                              static_cast<int>(g.c), static_cast<int>(g.h), static_cast<int>(g.w)));
    LS_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, format, type, static_cast<int>(batch),
                                              static_cast<int>(oc), static_cast<int>(g.oh), static_cast<int>(g.ow)));
    int dn = 0, dc = 0, dh = 0, dw = 0;
    LS_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv, x, w, &dn, &dc, &dh, &dw));
    LS_REQUIRE(dn == batch && dc == oc && dh == g.oh && dw == g.ow,
               describe(batch) + ": cuDNN computes output [" + std::to_string(dn) + ", " + std::to_string(dc) +
                   ", " + std::to_string(dh) + ", " + std::to_string(dw) + "]");

    auto found = chosen_for.find(batch);
    Choice fresh;
    if (found == chosen_for.end()) {
      fresh = choose(ctx, batch);
      if (!fresh.provisional) found = chosen_for.emplace(batch, fresh).first;
    }
    const Choice& ch = found != chosen_for.end() ? found->second : fresh;
    fwd_algo = ch.fwd_algo;
    data_algo = ch.data_algo;
    filter_algo = ch.filter_algo;
    fwd_math = ch.fwd_math;
    data_math = ch.data_math;
    filter_math = ch.filter_math;
    algos = ch.algos;
    n = batch;
  }

  // The three algorithms for the descriptors as set for `batch`: from cuDNN's
  // heuristics, or (ConvSearch::Benchmark) from cudnnFind*, which runs every
  // candidate once and lists them fastest first; either list goes through
  // pick(). Finding synchronises the device and allocates its own scratch, so
  // inside a CUDA graph capture (a batch size first seen there) the heuristic
  // list is used instead and the choice is provisional (not cached: the next
  // call outside a capture searches). A failed search, or one whose list has
  // no usable entry, falls back to the heuristics too.
  Choice choose(cuda::Context& ctx, int64_t batch) {
    const cudnnHandle_t handle = ctx.cudnn();
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    LS_CUDA_CHECK(cudaStreamIsCapturing(ctx.raw_stream(), &capture));
    const bool benchmark = ctx.conv_search() == cuda::ConvSearch::Benchmark;
    const bool find = benchmark && capture == cudaStreamCaptureStatusNone;
    // Before each list: 16-bit offers tensor-op algorithms (pick() then sets
    // each candidate's own math type); fp32 keeps FMA math (no TF32).
    const auto math_for_list = [&] {
      LS_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, is_16bit(data) ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    };
    Choice ch;
    ch.provisional = benchmark && !find;
    Algorithms& chosen = ch.algos;
    bool fell_back = false;
    {
      int max = 0;
      LS_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max));
      cudnnConvolutionFwdAlgoPerf_t p{};
      const bool ok = choose_one(
          max, find,
          [&](int req, int* got, cudnnConvolutionFwdAlgoPerf_t* perf) {
            math_for_list();
            return cudnnFindConvolutionForwardAlgorithm(handle, x, w, conv, y, req, got, perf);
          },
          [&](int req, int* got, cudnnConvolutionFwdAlgoPerf_t* perf) {
            math_for_list();
            return cudnnGetConvolutionForwardAlgorithm_v7(handle, x, w, conv, y, req, got, perf);
          },
          limit, is_16bit(data),
          [&](cudnnConvolutionFwdAlgo_t a, cudnnMathType_t math, size_t* bytes) {
            if (is_16bit(data)) LS_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, math));
            return cudnnGetConvolutionForwardWorkspaceSize(handle, x, w, conv, y, a, bytes);
          },
          p, chosen.forward_bytes, fell_back);
      LS_REQUIRE(ok, describe(batch) + ": cuDNN offers no usable forward algorithm");
      ch.fwd_algo = p.algo;
      ch.fwd_math = p.mathType;
      chosen.forward = static_cast<int>(p.algo);
      chosen.deterministic = chosen.deterministic && p.determinism == CUDNN_DETERMINISTIC;
    }
    {
      int max = 0;
      LS_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max));
      cudnnConvolutionBwdDataAlgoPerf_t p{};
      const bool ok = choose_one(
          max, find,
          [&](int req, int* got, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
            math_for_list();
            return cudnnFindConvolutionBackwardDataAlgorithm(handle, w, y, conv, x, req, got, perf);
          },
          [&](int req, int* got, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
            math_for_list();
            return cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w, y, conv, x, req, got, perf);
          },
          limit, is_16bit(data),
          [&](cudnnConvolutionBwdDataAlgo_t a, cudnnMathType_t math, size_t* bytes) {
            if (is_16bit(data)) LS_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, math));
            return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w, y, conv, x, a, bytes);
          },
          p, chosen.backward_data_bytes, fell_back);
      LS_REQUIRE(ok, describe(batch) + ": cuDNN offers no usable backward-data algorithm");
      ch.data_algo = p.algo;
      ch.data_math = p.mathType;
      chosen.backward_data = static_cast<int>(p.algo);
      chosen.deterministic = chosen.deterministic && p.determinism == CUDNN_DETERMINISTIC;
    }
    {
      int max = 0;
      LS_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max));
      cudnnConvolutionBwdFilterAlgoPerf_t p{};
      const bool ok = choose_one(
          max, find,
          [&](int req, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
            math_for_list();
            return cudnnFindConvolutionBackwardFilterAlgorithm(handle, x, y, conv, w, req, got, perf);
          },
          [&](int req, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
            math_for_list();
            return cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, x, y, conv, w, req, got, perf);
          },
          limit, is_16bit(data),
          [&](cudnnConvolutionBwdFilterAlgo_t a, cudnnMathType_t math, size_t* bytes) {
            if (is_16bit(data)) LS_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, math));
            return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, x, y, conv, w, a, bytes);
          },
          p, chosen.backward_filter_bytes, fell_back);
      LS_REQUIRE(ok, describe(batch) + ": cuDNN offers no usable backward-filter algorithm");
      ch.filter_algo = p.algo;
      ch.filter_math = p.mathType;
      chosen.backward_filter = static_cast<int>(p.algo);
      chosen.deterministic = chosen.deterministic && p.determinism == CUDNN_DETERMINISTIC;
    }
    math_for_list();  // fp32 relies on FMA math on the descriptor; 16-bit sets its type before each call
    chosen.benchmarked = find && !fell_back;
    return ch;
  }
};

Conv2dCuda::Conv2dCuda(int64_t oc, const ConvGeometry& g, ConvData data, Layout layout, size_t workspace_limit)
    : impl_(std::make_unique<Impl>()) {
  const std::string what = describe(0, oc, g);
  LS_REQUIRE(oc > 0 && g.c > 0 && g.h > 0 && g.w > 0 && g.kh > 0 && g.kw > 0 && g.stride > 0 && g.pad >= 0,
             what + ": invalid shape");
  LS_REQUIRE(fits_int(oc) && fits_int(g.c) && fits_int(g.h) && fits_int(g.w) && fits_int(g.kh) && fits_int(g.kw) &&
                 fits_int(g.stride) && fits_int(g.pad),
             what + ": dimensions must fit in int");
  LS_REQUIRE(g.oh == (g.h + 2 * g.pad - g.kh) / g.stride + 1 && g.ow == (g.w + 2 * g.pad - g.kw) / g.stride + 1 &&
                 g.oh > 0 && g.ow > 0,
             what + ": output size does not match the input, kernel, stride and padding");
  Impl& m = *impl_;
  m.oc = oc;
  m.g = g;
  m.data = data;
  m.layout = layout;
  m.limit = workspace_limit;
  // impl_ is complete: if a call below throws, its destructor frees what was made.
  LS_CUDNN_CHECK(cudnnCreateTensorDescriptor(&m.x));
  LS_CUDNN_CHECK(cudnnCreateTensorDescriptor(&m.y));
  LS_CUDNN_CHECK(cudnnCreateFilterDescriptor(&m.w));
  LS_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&m.conv));
  // NHWC: the filter in [OC, KH, KW, C] (the layer's weight reordered per call), as tensor-core kernels read it.
  LS_CUDNN_CHECK(cudnnSetFilter4dDescriptor(m.w, cudnn_type(data),
                                            layout == Layout::NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                            static_cast<int>(oc),
                                            static_cast<int>(g.c), static_cast<int>(g.kh), static_cast<int>(g.kw)));
  LS_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(m.conv, static_cast<int>(g.pad), static_cast<int>(g.pad),
                                                 static_cast<int>(g.stride), static_cast<int>(g.stride), 1, 1,
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  // fp32: FMA math, no TF32 (see the header); 16-bit: tensor cores, fp32 accumulation
  // (the convolution's compute type above).
  LS_CUDNN_CHECK(cudnnSetConvolutionMathType(m.conv, is_16bit(data) ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
}

ConvData Conv2dCuda::data() const { return impl_->data; }

Conv2dCuda::~Conv2dCuda() = default;
Conv2dCuda::Conv2dCuda(Conv2dCuda&&) noexcept = default;
Conv2dCuda& Conv2dCuda::operator=(Conv2dCuda&&) noexcept = default;

Conv2dCuda::Algorithms Conv2dCuda::algorithms(cuda::Context& ctx, int64_t n) {
  impl_->prepare(ctx, n);
  return impl_->algos;
}


void Conv2dCuda::forward(cuda::Context& ctx, int64_t n, const float* x, const float* w, const float* b, float* y,
                         bool relu) {
  LS_REQUIRE(impl_->data == ConvData::F32,
             impl_->describe(n) + ": fp32 forward on a " + data_name(impl_->data) + " convolution");
  impl_->forward(ctx, n, x, w, b, y, relu);
}

void Conv2dCuda::forward_16(cuda::Context& ctx, int64_t n, const void* x, const void* w, const float* b, void* y,
                            bool relu) {
  LS_REQUIRE(is_16bit(impl_->data), impl_->describe(n) + ": 16-bit forward on an fp32 convolution");
  cuda::dispatch_16bit(dtype_16(impl_->data), [&](auto tag) {
    using T = decltype(tag);
    impl_->forward(ctx, n, x, w, b, static_cast<T*>(y), relu);
  });
}

void Conv2dCuda::backward(cuda::Context& ctx, int64_t n, const float* x, const float* w, const float* y, float* dy,
                          float* dx, float* dw, float* db, bool accumulate, bool relu) {
  Impl& m = *impl_;
  LS_REQUIRE(m.data == ConvData::F32, m.describe(n) + ": fp32 backward on a " + data_name(m.data) + " convolution");
  LS_REQUIRE(n >= 0, m.describe(n) + ": negative batch size");
  if (n == 0) {
    zero_param_grads(ctx, m.oc * m.g.k(), m.oc, dw, db, accumulate);
    return;
  }
  m.prepare(ctx, n);
  mask_and_bias_grad(ctx, m.layout, m.oc, m.g.oh * m.g.ow, n, y, dy, db, accumulate, relu);
  const size_t bytes = std::max(m.algos.backward_filter_bytes, dx ? m.algos.backward_data_bytes : size_t{0});
  const float one = 1.f, zero = 0.f;
  if (m.layout == Layout::NHWC) {
    // One workspace block: the weight's gradient (then the weight) in [OC, KH, KW, C], then cuDNN's scratch.
    const size_t wbytes = m.weight_scratch_bytes(sizeof(float));
    char* block = static_cast<char*>(ctx.workspace(wbytes + bytes));
    void* ws = block + wbytes;
    auto* dwk = reinterpret_cast<float*>(block);
    LS_CUDNN_CHECK(cudnnConvolutionBackwardFilter(ctx.cudnn(), &one, m.x, x, m.y, dy, m.conv, m.filter_algo, ws,
                                                  bytes, &zero, m.w, dwk));
    const int64_t weights = m.oc * m.g.k();
    weight_grad_from_nhwc_kernel<float><<<blocks_for(weights), kThreads, 0, ctx.raw_stream()>>>(
        m.oc, m.g.c, m.g.kh * m.g.kw, dwk, dw, accumulate);
    LS_CUDA_CHECK_LAUNCH();
    if (dx)
      LS_CUDNN_CHECK(cudnnConvolutionBackwardData(ctx.cudnn(), &one, m.w, m.weight_to_nhwc(ctx, w, block), m.y, dy,
                                                  m.conv, m.data_algo, ws, bytes, &zero, m.x, dx));
    return;
  }
  void* ws = ctx.workspace(bytes);
  LS_CUDNN_CHECK(cudnnConvolutionBackwardFilter(ctx.cudnn(), &one, m.x, x, m.y, dy, m.conv, m.filter_algo, ws, bytes,
                                                accumulate ? &one : &zero, m.w, dw));
  if (dx)
    LS_CUDNN_CHECK(cudnnConvolutionBackwardData(ctx.cudnn(), &one, m.w, w, m.y, dy, m.conv, m.data_algo, ws, bytes,
                                                &zero, m.x, dx));
}

void Conv2dCuda::backward_16(cuda::Context& ctx, int64_t n, const void* x, const void* w, const void* y, void* dy,
                             void* dx, float* dw, float* db, bool accumulate, bool relu) {
  Impl& m = *impl_;
  LS_REQUIRE(is_16bit(m.data), m.describe(n) + ": 16-bit backward on an fp32 convolution");
  LS_REQUIRE(n >= 0, m.describe(n) + ": negative batch size");
  const int64_t weights = m.oc * m.g.k();
  if (n == 0) {
    zero_param_grads(ctx, weights, m.oc, dw, db, accumulate);
    return;
  }
  m.prepare(ctx, n);
  cuda::dispatch_16bit(dtype_16(m.data), [&](auto tag) {
    using T = decltype(tag);
    mask_and_bias_grad(ctx, m.layout, m.oc, m.g.oh * m.g.ow, n, static_cast<const T*>(y), static_cast<T*>(dy), db,
                       accumulate, relu);
    // One workspace block: the 16-bit dw first, then cuDNN's scratch.
    const size_t dw16_bytes = aligned(static_cast<size_t>(weights) * sizeof(T));
    const size_t bytes = std::max(m.algos.backward_filter_bytes, dx ? m.algos.backward_data_bytes : size_t{0});
    char* block = static_cast<char*>(ctx.workspace(dw16_bytes + bytes));
    auto* dw16 = reinterpret_cast<T*>(block);
    void* ws = block + dw16_bytes;
    const float one = 1.f, zero = 0.f;
    LS_CUDNN_CHECK(cudnnSetConvolutionMathType(m.conv, m.filter_math));
    LS_CUDNN_CHECK(cudnnConvolutionBackwardFilter(ctx.cudnn(), &one, m.x, x, m.y, dy, m.conv, m.filter_algo, ws,
                                                  bytes, &zero, m.w, dw16));
    // NHWC: dw16 is [OC, KH, KW, C]; reordered while widened.
    if (m.layout == Layout::NHWC)
      weight_grad_from_nhwc_kernel<T><<<blocks_for(weights), kThreads, 0, ctx.raw_stream()>>>(
          m.oc, m.g.c, m.g.kh * m.g.kw, dw16, dw, accumulate);
    else
      widen_grad_kernel<T><<<blocks_for(weights), kThreads, 0, ctx.raw_stream()>>>(weights, dw16, dw, accumulate);
    LS_CUDA_CHECK_LAUNCH();
    if (dx) {
      // NHWC: the weight reordered into dw16's space (free again: the widening kernel ran before, in stream order).
      const void* wk = m.layout == Layout::NHWC ? m.weight_to_nhwc(ctx, w, dw16) : w;
      LS_CUDNN_CHECK(cudnnSetConvolutionMathType(m.conv, m.data_math));
      LS_CUDNN_CHECK(cudnnConvolutionBackwardData(ctx.cudnn(), &one, m.w, wk, m.y, dy, m.conv, m.data_algo, ws, bytes,
                                                  &zero, m.x, dx));
    }
  });
}

}  // namespace lockstep::ops
