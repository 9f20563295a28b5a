// GPU optimizer update kernels: grid-stride loops (256 threads per block,
// int64 indices) over the element updates of ops/update/update_rule.h, the
// ones the host loops (update_cpu.cpp) run.
#include "ops/update/update_cuda.h"

#include <algorithm>
#include <string>

#include "core/throw.h"
#include "cuda/check.h"
#include "cuda/launch.cuh"

namespace lockstep::ops {
namespace {

using cuda::kThreads;
using cuda::blocks_for;
using cuda::first_index;
using cuda::grid_stride;

// With a loss-scale state: nothing on a skipped step, else its gradient factor
// and learning rate.
__device__ inline bool apply_loss_scale(const StepState* amp, float& scale, float& lr) {
  if (!amp) return true;
  if (amp->skip) return false;
  scale = amp->grad_factor;
  lr = amp->lr;
  return true;
}

__global__ void sgd_kernel(int64_t n, float* p, const float* g, float lr, float scale, float wd,
                           const StepState* amp) {
  if (!apply_loss_scale(amp, scale, lr)) return;
  for (int64_t i = first_index(); i < n; i += grid_stride()) sgd_element(p[i], g[i], lr, scale, wd);
}

__global__ void sgd_momentum_kernel(int64_t n, float* p, const float* g, float* buf, float lr, float scale, float wd,
                                    float m, bool nesterov, const StepState* amp) {
  if (!apply_loss_scale(amp, scale, lr)) return;
  for (int64_t i = first_index(); i < n; i += grid_stride())
    sgd_momentum_element(p[i], g[i], buf[i], lr, scale, wd, m, nesterov);
}

__global__ void adam_kernel(int64_t n, float* p, const float* g, float* m, float* v, AdamScalars a,
                            float decoupled_wd, const StepState* amp) {
  float lr = 0.f;
  if (!apply_loss_scale(amp, a.scale, lr)) return;
  if (amp) {
    a.step_size = amp->step_size;
    a.inv_sqrt_bc2 = amp->inv_sqrt_bc2;
    a.shrink = 1.f - __fmul_rn(lr, decoupled_wd);  // AdamW's 1 - lr * wd as the host rounds it (no FMA)
  }
  for (int64_t i = first_index(); i < n; i += grid_stride()) adam_element(p[i], g[i], m[i], v[i], a);
}

}  // namespace

void sgd_update_cuda(int64_t n, float* p, const float* g, float* momentum_buf, float lr, float scale,
                     float weight_decay, float momentum, bool nesterov, const StepState* amp,
                     cudaStream_t stream) {
  if (n <= 0) return;
  if (momentum == 0.f) {  // as Sgd::update: no buffer, no Nesterov term
    sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, p, g, lr, scale, weight_decay, amp);
  } else {
    if (momentum_buf == nullptr)
      throw_error(__FILE__, __LINE__, "sgd_update_cuda: momentum " + std::to_string(momentum) + " without a buffer");
    sgd_momentum_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, p, g, momentum_buf, lr, scale, weight_decay,
                                                                momentum, nesterov, amp);
  }
  LS_CUDA_CHECK_LAUNCH();
}

void adam_update_cuda(int64_t n, float* p, const float* g, float* m, float* v, const AdamScalars& a,
                      float decoupled_wd, const StepState* amp, cudaStream_t stream) {
  if (n <= 0) return;
  adam_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, p, g, m, v, a, decoupled_wd, amp);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace lockstep::ops
