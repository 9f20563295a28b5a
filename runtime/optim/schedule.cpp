// LR schedule evaluation.
#include "optim/schedule.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/input_subject.h"

namespace lockstep {

void LrSchedule::validate() const {
  LS_CHECK_INPUT_ON(kind == "constant" || kind == "step" || kind == "cosine", subject::kLrSchedule,
                    " '{}' is not one of constant, step, cosine", kind);
  LS_CHECK_INPUT_ON(std::isfinite(base_lr) && base_lr > 0.f, subject::kLearningRate, " {} must be a positive number",
                    base_lr);
  LS_CHECK_INPUT(warmup_steps >= 0, "warmup of {} steps is negative", warmup_steps);
  LS_CHECK_INPUT(std::isfinite(warmup_start_lr) && warmup_start_lr >= 0.f && warmup_start_lr <= base_lr,
                 "warmup start LR {} must be in [0, {}]", warmup_start_lr, base_lr);
  LS_CHECK_INPUT(kind != "step" || step_every > 0, "step schedule needs a positive decay interval");
  LS_CHECK_INPUT_ON(gamma > 0.f && gamma <= 1.f, subject::kLrGamma, " {} must be in (0, 1]", gamma);
}

float LrSchedule::lr(int64_t step) const {
  if (warmup_steps > 0 && step < warmup_steps) {
    if (warmup_start_lr > 0.f)
      return static_cast<float>(warmup_start_lr + (static_cast<double>(base_lr) - warmup_start_lr) *
                                                      static_cast<double>(step) / static_cast<double>(warmup_steps));
    return base_lr * static_cast<float>(step + 1) / static_cast<float>(warmup_steps);
  }
  if (kind == "step") return base_lr * std::pow(gamma, static_cast<float>(step / step_every));
  if (kind == "cosine" && total_steps > warmup_steps) {
    const double t = std::clamp(static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps),
                                0.0, 1.0);
    return static_cast<float>(min_lr + 0.5 * (base_lr - min_lr) * (1.0 + std::cos(M_PI * t)));
  }
  return base_lr;
}

}  // namespace lockstep
