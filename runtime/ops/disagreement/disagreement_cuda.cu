// The disagreement measure's two reductions on the GPU (see the header):
// per-block partials (sum of squares, or maximum) written to a small device
// array, combined on the host in block order.
#include "ops/disagreement/disagreement_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/throw.h"
#include "cuda/check.h"
#include "cuda/float16.cuh"
#include "cuda/launch.cuh"
#include "tensor/allocator.h"

namespace lockstep::ops {
namespace {

template <typename T>
__global__ void sum_squares_kernel(const T* ref, int64_t n, double* partial) {
  __shared__ double s[cuda::kThreads];
  double acc = 0;
  for (int64_t i = cuda::first_index(); i < n; i += cuda::grid_stride()) {
    const double r = cuda::load(ref, i);
    acc += r * r;
  }
  s[threadIdx.x] = acc;
  __syncthreads();
  cuda::block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

template <typename T>
__global__ void max_disagreement_kernel(const T* ref, const T* got, int64_t n, double rms, double* partial) {
  __shared__ double s[cuda::kThreads];
  const double inf = CUDART_INF;
  double worst = 0;
  for (int64_t i = cuda::first_index(); i < n; i += cuda::grid_stride()) {
    const double r = cuda::load(ref, i), g = cuda::load(got, i);
    const double diff = fabs(g - r), scale = fabs(r) + rms;
    double d = scale > 0 ? diff / scale : (diff == 0 ? 0 : inf);
    if (isnan(d)) d = inf;
    worst = fmax(worst, d);
  }
  s[threadIdx.x] = worst;
  __syncthreads();
  for (int half = cuda::kThreads / 2; half > 0; half >>= 1) {
    if (static_cast<int>(threadIdx.x) < half) s[threadIdx.x] = fmax(s[threadIdx.x], s[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

// The per-block partials of one reduction, launched by `launch(blocks, out)`, on the host.
template <typename Launch>
std::vector<double> partials(cuda::Context& ctx, int64_t n, Launch launch) {
  const int blocks = cuda::blocks_for(n);
  std::vector<double> host(static_cast<size_t>(blocks));
  const size_t bytes = host.size() * sizeof(double);
  const Storage out(ctx.allocator(), bytes);  // from the context's caching allocator, given back on every path
  launch(blocks, static_cast<double*>(out.data()));
  LS_CUDA_CHECK_LAUNCH();
  LS_CUDA_CHECK(cudaMemcpyAsync(host.data(), out.data(), bytes, cudaMemcpyDeviceToHost, ctx.raw_stream()));
  ctx.synchronize();
  return host;
}

}  // namespace

double rms_cuda(cuda::Context& ctx, DType dt, const void* ref, int64_t n) {
  LS_REQUIRE(n >= 0, "rms_cuda: negative size");
  if (n == 0) return 0;
  double sum = 0;
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    for (double p : partials(ctx, n, [&](int blocks, double* out) {
           sum_squares_kernel<T><<<blocks, cuda::kThreads, 0, ctx.raw_stream()>>>(static_cast<const T*>(ref), n, out);
         }))
      sum += p;
  });
  return std::sqrt(sum / static_cast<double>(n));
}

double disagreement_cuda(cuda::Context& ctx, DType dt, const void* ref, const void* got, int64_t n, double rms) {
  LS_REQUIRE(n >= 0, "disagreement_cuda: negative size");
  if (n == 0) return 0;
  double worst = 0;
  cuda::dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    for (double p : partials(ctx, n, [&](int blocks, double* out) {
           max_disagreement_kernel<T><<<blocks, cuda::kThreads, 0, ctx.raw_stream()>>>(
               static_cast<const T*>(ref), static_cast<const T*>(got), n, rms, out);
         }))
      worst = std::max(worst, p);
  });
  return worst;
}

}  // namespace lockstep::ops
