// Kernels of dynamic loss scaling: a grid-stride inf/NaN check that only ever
// writes 1 (racing writers store the same value), and the one-thread rule.
#include "optim/loss_scale_cuda.h"

#include "cuda/check.h"
#include "cuda/launch.cuh"

namespace lockstep {
namespace {

__global__ void flag_nonfinite_kernel(int64_t n, const float* g, LossScaleState* state) {
  bool bad = false;
  for (int64_t i = cuda::first_index(); i < n; i += cuda::grid_stride()) bad |= !isfinite(g[i]);
  if (bad) state->found_nonfinite = 1;
}

__global__ void loss_scale_step_kernel(LossScaleState* state, LossScaleConfig config, float lr, const float* lr_dev,
                                       float base_factor, float beta1, float beta2) {
  loss_scale_step(*state, config, lr_dev ? *lr_dev : lr, base_factor, beta1, beta2);
}

}  // namespace

void flag_nonfinite_cuda(int64_t n, const float* g, LossScaleState* state, cudaStream_t stream) {
  if (n <= 0) return;
  flag_nonfinite_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, g, state);
  LS_CUDA_CHECK_LAUNCH();
}

void loss_scale_step_cuda(LossScaleState* state, const LossScaleConfig& config, float lr, const float* lr_dev,
                          float base_factor, float beta1, float beta2, cudaStream_t stream) {
  loss_scale_step_kernel<<<1, 1, 0, stream>>>(state, config, lr, lr_dev, base_factor, beta1, beta2);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace lockstep
