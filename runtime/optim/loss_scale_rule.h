// Dynamic loss scaling for fp16 training: the state and the once-per-step
// rule, shared by the GPU (one thread runs it, ops/update/loss_scale_cuda.cu) and
// the host (unit tests; a plain header, no CUDA needed to include it).
//
// fp16 holds magnitudes from 6e-8 to 65504: small gradients flush to zero
// unless the loss, and with it every gradient, is multiplied by a large scale
// S before backward. The averaged gradients are then checked for inf/NaN:
//   - all finite: the update uses gradients / S (folded into the optimizer's
//     gradient factor, no extra pass), and after `growth_interval` finite
//     steps in a row S grows by `growth_factor` (unless that overflows fp32);
//   - any inf/NaN: the step is skipped (parameters, optimizer state and its
//     step count unchanged) and S shrinks by `backoff_factor`.
// These are torch.cuda.amp.GradScaler's semantics and defaults (init 2^16,
// growth 2, backoff 0.5, interval 2000). The check runs after the gradients
// are averaged over ranks, so every rank sees the same inf/NaN and takes the
// same decision without another collective.
//
// With a fixed scale (LossScaleConfig::dynamic false) the same state and rule
// carry a captured CUDA graph's per-step scalars: the learning rate read from
// device memory, and Adam's bias corrections.
//
// Gradient clipping (max_grad_norm > 0, optim/grad_clip.h) rides on the same
// state: the sum of squares of the averaged gradients lands in grad_sumsq
// before the rule runs, and the rule scales grad_factor by the clip
// coefficient of the unscaled gradient's norm. With a dynamic scale that sum
// is also the inf/NaN check (it is finite exactly when every gradient is).
//
// Everything stays on the device: the scale the loss gradient reads, the
// decision the optimizer kernels read and Adam's bias corrections for the
// applied-step count (skipped steps do not count, as in PyTorch) -- the host
// never waits for a step's outcome.
#pragma once

#include <math.h>

#include <cstdint>

#include "core/host_device.h"
#include "optim/grad_clip.h"

namespace lockstep {

struct LossScaleConfig {
  // false: a fixed scale (init_scale; 1 means none) with no inf/NaN check --
  // the state then only carries the step's device-side scalars (the learning
  // rate and Adam's bias corrections), which captured CUDA graphs need.
  bool dynamic = true;
  float init_scale = 65536.f;
  float growth_factor = 2.f;
  float backoff_factor = 0.5f;
  int32_t growth_interval = 2000;  // finite steps in a row before the scale grows
  float max_grad_norm = 0.f;       // > 0: clip the gradient to this global L2 norm (--clip-grad-norm)
};

// Lives in device memory; written only by kernels (and by restore at start).
struct LossScaleState {
  float scale = 0.f;            // S: multiplies the loss gradient of the coming backward
  int32_t good_steps = 0;       // finite steps since S last changed
  int32_t found_nonfinite = 0;  // set by the gradient check, cleared by loss_scale_step
  int32_t skip = 0;             // loss_scale_step's decision for this step's update
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
inline LossScaleState initial_loss_scale_state(const LossScaleConfig& c) {
  LossScaleState s;
  s.scale = c.init_scale;
  return s;
}

// Once per step, after the gradient check and before the optimizer's kernels:
// decides this step (skip, grad_factor from the scale its backward used and,
// with clipping, the clip coefficient of grad_sumsq's norm, the learning
// rate, Adam's scalars for t = applied + 1 exactly as Adam::update computes
// them), then moves the scale for the next step (a
// dynamic one only) and clears the check's flag. beta1 = beta2 = 0 for SGD
// (the Adam scalars are then lr and 1, unused).
LS_HOST_DEVICE inline void loss_scale_step(LossScaleState& s, const LossScaleConfig& c, float lr, float base_factor,
                                           float beta1, float beta2) {
  s.lr = lr;
  s.grad_factor = base_factor / s.scale;
  if (c.max_grad_norm > 0.f && c.dynamic && !isfinite(s.grad_sumsq)) s.found_nonfinite = 1;
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
    s.scale *= c.backoff_factor;
    s.good_steps = 0;
    ++s.skipped;
  } else {
    ++s.applied;
    const double t = static_cast<double>(s.applied);
    s.step_size = static_cast<float>(lr / (1.0 - ::pow(static_cast<double>(beta1), t)));
    s.inv_sqrt_bc2 = static_cast<float>(1.0 / ::sqrt(1.0 - ::pow(static_cast<double>(beta2), t)));
    if (c.dynamic && ++s.good_steps >= c.growth_interval) {
      const float grown = s.scale * c.growth_factor;
      if (grown <= 3.402823466e38f) s.scale = grown;  // stays finite (GradScaler's guard)
      s.good_steps = 0;
    }
  }
  s.found_nonfinite = 0;
}

}  // namespace lockstep
