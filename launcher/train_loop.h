// The trainer's training loop: data, model, optimizer, per-epoch evaluation,
// the seed-style epoch table, metrics and weights.
#pragma once

#include "core/logging.h"
#include "options.h"

namespace lockstep {

struct TrainSummary {
  int64_t steps = 0;
  int64_t epochs = 0;
  double images_per_sec = 0;  // training only, after the first 5 steps
  double test_acc = 0;
  double test_loss = 0;
  double train_seconds = 0;
  bool reached_target = false;  // --target-accuracy reached (then training stopped early)
};

TrainSummary run_training(const TrainConfig& config, const Logger& log);

}  // namespace lockstep
