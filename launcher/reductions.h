// The trainer's small host-side reductions over ranks: the loss/accuracy sums
// of an epoch or an evaluation, on the training thread with the trainer's
// communicator, reported to its CollectiveTracker. (--sync-batchnorm's
// statistics: comm/stats_reducer.h.)
#pragma once

#include "comm/collective_tracker.h"
#include "comm/communicator.h"
#include "comm/stats_reducer.h"
#include "nn/loss.h"

namespace lockstep {

// Loss, correct predictions and samples, summed locally, reduced over ranks.
struct Sums {
  double loss = 0, correct = 0, count = 0;
  void add(const LossStats& s);
  Sums reduced(Communicator& comm, CollectiveTracker& tracker, CollectiveKind kind) const;  // collective
  double mean_loss() const { return count > 0 ? loss / count : 0.0; }
  double acc() const { return count > 0 ? correct / count : 0.0; }
};

}  // namespace lockstep
