// Learning-rate schedules over optimizer steps: constant, step decay or cosine
// decay, each with an optional linear warmup, per step: from base/warmup to base,
// or, with a warmup start (Goyal et al.'s gradual warmup for large batches:
// start = the LR before linear scaling), from start at step 0 to base at step
// warmup_steps, in equal increments.
#pragma once

#include <cstdint>
#include <string>

namespace lockstep {

struct LrSchedule {
  std::string kind = "constant";  // constant | step | cosine
  float base_lr = 0.01f;
  int64_t warmup_steps = 0;
  float warmup_start_lr = 0.f;    // 0: the ramp starts at base_lr / warmup_steps
  int64_t total_steps = 0;        // cosine: decays to min_lr at this step
  int64_t step_every = 0;         // step: multiply by gamma every this many steps
  float gamma = 0.1f;             // step
  float min_lr = 0.f;             // cosine

  void validate() const;          // throws InputError for impossible settings
  float lr(int64_t step) const;   // learning rate for optimizer step `step` (0-based)
};

}  // namespace lockstep
