// The optimizers' updates over a range of the flat parameter, gradient and
// state buffers (nn/parameter_store.h), where those buffers are: the host
// (ex.gpu null; OpenMP loops, update_cpu.cpp) or a GPU (ex.gpu set; one fused
// kernel per range on its stream, update_cuda.h). Pointers are offset to the
// range's first element; n may be 0. The element formulas: update_rule.h.
// The step's device-side rule (loss scaling, clipping; optim/step_rule.h), on
// the GPU: step_rule_cuda.h through device_step_rule.
// Dispatch: update.cpp.
#pragma once

#include <cstdint>

#include "ops/exec.h"
#include "ops/update/update_rule.h"
#include "optim/step_rule.h"

namespace lockstep::ops {

// `amp` (GPU only, nullable): the device step state (optim/step_rule.h),
// read by the kernel: a skipped step changes nothing, otherwise its gradient
// factor, learning rate and Adam scalars replace the host's (update_cuda.h).
// decoupled_wd: AdamW's weight decay for this range (0 otherwise), for amp.
void adam_update(int64_t n, float* p, const float* g, float* m, float* v, const AdamScalars& a, float decoupled_wd,
                 const StepState* amp, const Exec& ex);
// momentum_buf may be null when momentum == 0.
void sgd_update(int64_t n, float* p, const float* g, float* momentum_buf, float lr, float scale, float weight_decay,
                float momentum, bool nesterov, const StepState* amp, const Exec& ex);

// The step rule on the GPU (step_rule_cuda.h): with a dynamic loss scale the
// inf/NaN check of grads [n] (with clipping, their sum of squares into
// `partials`, which is that check too), then the rule with this step's learning rate (or *lr_dev
// when set), base gradient factor and Adam betas, on `state` (device memory).
void device_step_rule(const float* grads, int64_t n, double* partials, StepState* state, const StepConfig& config,
                      float lr, const float* lr_dev, float base_factor, float beta1, float beta2, const Exec& ex);
// The number of doubles device_step_rule's `partials` holds.
int64_t step_rule_partials();

}  // namespace lockstep::ops
