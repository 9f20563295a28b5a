// Dispatch for ops/update/update.h: host loops, or the GPU kernels on the
// context's stream.
#include "ops/update/update.h"

#include "core/error.h"
#include "ops/update/update_cpu.h"

#ifdef LOCKSTEP_HAVE_CUDA
#include "cuda/context.h"
#include "ops/update/step_rule_cuda.h"
#include "ops/update/update_cuda.h"
#endif

namespace lockstep::ops {

void adam_update(int64_t n, float* p, const float* g, float* m, float* v, const AdamScalars& a, float decoupled_wd,
                 const StepState* amp, const Exec& ex) {
  if (ex.gpu) {
#ifdef LOCKSTEP_HAVE_CUDA
    adam_update_cuda(n, p, g, m, v, a, decoupled_wd, amp, ex.gpu->raw_stream());
    return;
#else
    LS_THROW("{}: device buffers need a build with CUDA support", ex.who);
#endif
  }
  LS_CHECK(amp == nullptr, "{}: a device step state with host buffers", ex.who);
  adam_update_cpu(n, p, g, m, v, a);
}

void sgd_update(int64_t n, float* p, const float* g, float* momentum_buf, float lr, float scale, float weight_decay,
                float momentum, bool nesterov, const StepState* amp, const Exec& ex) {
  if (ex.gpu) {
#ifdef LOCKSTEP_HAVE_CUDA
    sgd_update_cuda(n, p, g, momentum_buf, lr, scale, weight_decay, momentum, nesterov, amp, ex.gpu->raw_stream());
    return;
#else
    LS_THROW("{}: device buffers need a build with CUDA support", ex.who);
#endif
  }
  LS_CHECK(amp == nullptr, "{}: a device step state with host buffers", ex.who);
  sgd_update_cpu(n, p, g, momentum_buf, lr, scale, weight_decay, momentum, nesterov);
}

void device_step_rule(const float* grads, int64_t n, double* partials, StepState* state, const StepConfig& config,
                      float lr, const float* lr_dev, float base_factor, float beta1, float beta2, const Exec& ex) {
#ifdef LOCKSTEP_HAVE_CUDA
  LS_CHECK(ex.gpu != nullptr, "{}: the device step rule runs on a GPU (no device context given)", ex.who);
  const cudaStream_t st = ex.gpu->raw_stream();
  if (config.max_grad_norm > 0.f)  // the rule reads the sum; a non-finite one is the inf/NaN flag
    grad_sumsq_cuda(n, grads, partials, state, st);
  else if (config.loss_scale.dynamic)
    flag_nonfinite_cuda(n, grads, state, st);
  device_step_rule_cuda(state, config, lr, lr_dev, base_factor, beta1, beta2, st);
#else
  (void)grads, (void)n, (void)partials, (void)state, (void)config, (void)lr, (void)lr_dev, (void)base_factor,
      (void)beta1, (void)beta2;
  LS_THROW("{}: the device step rule runs on a GPU; this build has no CUDA support", ex.who);
#endif
}

int64_t step_rule_partials() {
#ifdef LOCKSTEP_HAVE_CUDA
  return kSumsqBlocks;
#else
  return 0;
#endif
}

}  // namespace lockstep::ops
