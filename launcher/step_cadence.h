// StepCadence: what runs between two training steps, decided from counters
// every rank shares, so every rank does the same thing after the same step:
//   an injected fault (--inject-fault KIND@RANK:STEP: this rank's, after that step)
//   the replica check (--check-replicas-every N)
//   a checkpoint (--checkpoint-every N, each epoch's end, the last step)
// The stop agreement (SIGTERM, SIGUSR1) follows every step; it is a
// collective the trainer runs when a stop source is set.
#pragma once

#include <cstdint>

#include "options.h"

namespace lockstep {

struct StepCadence {
  enum class Fault { None, Error, ReplicaDrift };
  struct Due {
    Fault fault = Fault::None;
    bool replica_check = false;
    bool checkpoint = false;
  };

  StepCadence() = default;
  StepCadence(const TrainConfig& c, int rank, int64_t total_steps);

  // After step `step` (counted from 1) has been applied; epoch_end: it was
  // the epoch's last.
  Due after(int64_t step, bool epoch_end) const;

 private:
  int64_t checkpoint_every_ = 0, check_replicas_every_ = 0, total_steps_ = 0;
  Fault fault_ = Fault::None;  // this rank's injected fault, if any
  int64_t fault_step_ = 0;
};

}  // namespace lockstep
