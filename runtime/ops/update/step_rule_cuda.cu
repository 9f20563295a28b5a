// Kernels of dynamic loss scaling: a grid-stride inf/NaN check that only ever
// writes 1 (racing writers store the same value), clipping's fixed-order sum
// of squares, and the one-thread rule.
#include "ops/update/step_rule_cuda.h"

#include "cuda/check.h"
#include "cuda/launch.cuh"

namespace lockstep {
namespace {

__global__ void flag_nonfinite_kernel(int64_t n, const float* g, StepState* state) {
  bool bad = false;
  for (int64_t i = cuda::first_index(); i < n; i += cuda::grid_stride()) bad |= !isfinite(g[i]);
  if (bad) state->found_nonfinite = 1;
}

// Launched with exactly kSumsqBlocks x kThreads: the loop's order is fixed.
__global__ void sumsq_blocks_kernel(int64_t n, const float* g, double* partials) {
  double acc = 0.0;
  for (int64_t i = cuda::first_index(); i < n; i += cuda::grid_stride()) {
    const double v = g[i];
    acc += v * v;
  }
  __shared__ double part[cuda::kThreads];
  part[threadIdx.x] = acc;
  __syncthreads();
  cuda::block_sum(part);
  if (threadIdx.x == 0) partials[blockIdx.x] = part[0];
}

// One block of kThreads: each thread adds its blocks' sums in order, then a tree.
__global__ void sumsq_finish_kernel(const double* partials, StepState* state) {
  double acc = 0.0;
  for (int b = threadIdx.x; b < kSumsqBlocks; b += cuda::kThreads) acc += partials[b];
  __shared__ double part[cuda::kThreads];
  part[threadIdx.x] = acc;
  __syncthreads();
  cuda::block_sum(part);
  if (threadIdx.x == 0) state->grad_sumsq = part[0];
}

__global__ void device_step_rule_kernel(StepState* state, StepConfig config, float lr, const float* lr_dev,
                                       float base_factor, float beta1, float beta2) {
  step_rule(*state, config, lr_dev ? *lr_dev : lr, base_factor, beta1, beta2);
}

}  // namespace

void flag_nonfinite_cuda(int64_t n, const float* g, StepState* state, cudaStream_t stream) {
  if (n <= 0) return;
  flag_nonfinite_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, g, state);
  LS_CUDA_CHECK_LAUNCH();
}

void grad_sumsq_cuda(int64_t n, const float* g, double* partials, StepState* state, cudaStream_t stream) {
  sumsq_blocks_kernel<<<kSumsqBlocks, cuda::kThreads, 0, stream>>>(n, g, partials);
  LS_CUDA_CHECK_LAUNCH();
  sumsq_finish_kernel<<<1, cuda::kThreads, 0, stream>>>(partials, state);
  LS_CUDA_CHECK_LAUNCH();
}

void device_step_rule_cuda(StepState* state, const StepConfig& config, float lr, const float* lr_dev,
                          float base_factor, float beta1, float beta2, cudaStream_t stream) {
  device_step_rule_kernel<<<1, 1, 0, stream>>>(state, config, lr, lr_dev, base_factor, beta1, beta2);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace lockstep
