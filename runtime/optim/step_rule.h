// A GPU training step's device-side scalars and the once-per-step rule that
// sets them, shared by the GPU (one thread runs it, ops/update/step_rule_cuda.cu)
// and the host (unit tests; a plain header, no CUDA needed to include it).
//
// The state (StepState) is what the optimizer kernels read instead of host
// arguments, so that no step waits for the host and a captured CUDA graph
// replays with this step's values: the learning rate, the gradient factor
// (1/N when averaging), the skip decision and Adam's bias corrections for the
// applied-step count (skipped steps do not count, as in PyTorch). Two
// optional parts ride on it:
//
// Dynamic loss scaling (StepConfig::loss_scale, fp16). fp16 holds magnitudes
// from 6e-8 to 65504: small gradients flush to zero unless the loss, and with
// it every gradient, is multiplied by a large scale S before backward. The
// averaged gradients are then checked for inf/NaN:
//   - all finite: the update uses gradients / S (folded into the gradient
//     factor, no extra pass), and after `growth_interval` finite steps in a
//     row S grows by `growth_factor` (unless that overflows fp32);
//   - any inf/NaN: the step is skipped (parameters, optimizer state and its
//     step count unchanged) and S shrinks by `backoff_factor`.
// These are torch.cuda.amp.GradScaler's semantics and defaults (init 2^16,
// growth 2, backoff 0.5, interval 2000). The check runs after the gradients
// are averaged over ranks, so every rank sees the same inf/NaN and takes the
// same decision without another collective. Without it the scale is fixed
// (1: none) and nothing is checked.
//
// Gradient clipping (StepConfig::max_grad_norm > 0, optim/grad_clip.h): the
// sum of squares of the averaged gradients lands in grad_sumsq before the rule
// runs, and the rule scales grad_factor by the clip coefficient of the
// unscaled gradient's norm. With a dynamic scale that sum is also the inf/NaN
// check (it is finite exactly when every gradient is).
#pragma once

#include <math.h>

#include <cstdint>

#include "core/host_device.h"
#include "optim/grad_clip.h"

namespace lockstep {

struct LossScaleConfig {
  // false: a fixed scale (init_scale; 1 means none) with no inf/NaN check.
  bool dynamic = true;
  float init_scale = 65536.f;
  float growth_factor = 2.f;
  float backoff_factor = 0.5f;
  int32_t growth_interval = 2000;  // finite steps in a row before the scale grows
};

// The default: no loss scaling (a fixed scale of 1), no clipping -- the state
// then carries only the step's scalars, which captured CUDA graphs need.
struct StepConfig {
  LossScaleConfig loss_scale{false, 1.f};
  float max_grad_norm = 0.f;  // > 0: clip the gradient to this global L2 norm
};

// Lives in device memory; written only by kernels (and by restore at start).
struct StepState {
  float scale = 0.f;            // S: multiplies the loss gradient of the coming backward
  int32_t good_steps = 0;       // finite steps since S last changed
  int32_t found_nonfinite = 0;  // set by the gradient check, cleared by step_rule
  int32_t skip = 0;             // step_rule's decision for this step's update
  int64_t skipped = 0;          // steps skipped so far
  int64_t applied = 0;          // updates applied so far (Adam's t for this step is `applied`)
  float grad_factor = 0.f;      // this step's gradient multiplier: base factor (1/N) / S
  float step_size = 0.f;        // Adam: lr / (1 - beta1^t)
  float inv_sqrt_bc2 = 0.f;     // Adam: 1 / sqrt(1 - beta2^t)
  float lr = 0.f;               // this step's learning rate (the optimizer kernels read it)
  // Clipping (max_grad_norm > 0):
  double grad_sumsq = 0.0;      // sum of squares of the averaged gradients before the factor (written before the rule)
  float grad_norm = 0.f;        // this step's gradient norm before clipping (after averaging and unscaling)
  int64_t clipped = 0;          // applied updates whose gradient was scaled down
};

// The state the first step sees.
inline StepState initial_step_state(const StepConfig& c) {
  StepState s;
  s.scale = c.loss_scale.init_scale;
  return s;
}

// Once per step, after the gradient check and before the optimizer's kernels:
// decides this step (skip, grad_factor from the scale its backward used and,
// with clipping, the clip coefficient of grad_sumsq's norm, the learning
// rate, Adam's scalars for t = applied + 1 exactly as Adam::update computes
// them), then moves the scale for the next step (a dynamic one only) and
// clears the check's flag. beta1 = beta2 = 0 for SGD
// (the Adam scalars are then lr and 1, unused).
LS_HOST_DEVICE inline void step_rule(StepState& s, const StepConfig& c, float lr, float base_factor, float beta1,
                                     float beta2) {
  s.lr = lr;
  s.grad_factor = base_factor / s.scale;
  if (c.max_grad_norm > 0.f && c.loss_scale.dynamic && !isfinite(s.grad_sumsq)) s.found_nonfinite = 1;
  // A scale fallen so far that 1/S overflows skips too (the trainer stops
  // training long before: below 2^-24).
  s.skip = s.found_nonfinite != 0 || !(s.grad_factor <= 3.402823466e38f) ? 1 : 0;
  if (c.max_grad_norm > 0.f) {
    s.grad_norm = static_cast<float>(::sqrt(s.grad_sumsq) * static_cast<double>(s.grad_factor));
    const float coef = clip_coefficient(s.grad_norm, c.max_grad_norm);
    if (!s.skip && coef < 1.f) {
      s.grad_factor *= coef;
      ++s.clipped;
    }
  }
  if (s.skip) {
    s.scale *= c.loss_scale.backoff_factor;
    s.good_steps = 0;
    ++s.skipped;
  } else {
    ++s.applied;
    const double t = static_cast<double>(s.applied);
    s.step_size = static_cast<float>(lr / (1.0 - ::pow(static_cast<double>(beta1), t)));
    s.inv_sqrt_bc2 = static_cast<float>(1.0 / ::sqrt(1.0 - ::pow(static_cast<double>(beta2), t)));
    if (c.loss_scale.dynamic && ++s.good_steps >= c.loss_scale.growth_interval) {
      const float grown = s.scale * c.loss_scale.growth_factor;
      if (grown <= 3.402823466e38f) s.scale = grown;  // stays finite (GradScaler's guard)
      s.good_steps = 0;
    }
  }
  s.found_nonfinite = 0;
}

}  // namespace lockstep
