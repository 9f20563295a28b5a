// The trainer's small host-side reductions over ranks: loss/accuracy sums of
// an epoch or an evaluation, and the batch-norm statistics of
// --sync-batchnorm. Both run on the training thread with the trainer's
// communicator and report themselves to its CollectiveTracker.
#pragma once

#include "comm/collective_tracker.h"
#include "comm/communicator.h"
#include "nn/loss.h"
#include "nn/module.h"

namespace lockstep {

// Loss, correct predictions and samples, summed locally, reduced over ranks.
struct Sums {
  double loss = 0, correct = 0, count = 0;
  void add(const LossStats& s);
  Sums reduced(Communicator& comm, CollectiveTracker& tracker, CollectiveKind kind) const;  // collective
  double mean_loss() const { return count > 0 ? loss / count : 0.0; }
  double acc() const { return count > 0 ? correct / count : 0.0; }
};

// Sums batch norm statistics over the ranks for --sync-batchnorm. Gradient
// buckets travel on the communication thread's own duplicate communicator (or
// on NCCL), so the two never mix.
class CommStatsReducer final : public StatsReducer {
 public:
  CommStatsReducer(Communicator& comm, CollectiveTracker& tracker) : comm_(comm), tracker_(tracker) {}
  void sum(double* values, int64_t n) override;

 private:
  Communicator& comm_;
  CollectiveTracker& tracker_;
  Tensor buf_;  // [>= n] F64, reused
};

}  // namespace lockstep
