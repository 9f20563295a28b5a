// The trainer's small host-side reductions over ranks: loss/accuracy sums of
// an epoch or an evaluation, and the batch-norm statistics of
// --sync-batchnorm. Both run on the training thread with the trainer's
// communicator and report themselves to its CollectiveTracker.
#pragma once

#include <memory>

#include "comm/collective_tracker.h"
#include "comm/communicator.h"
#include "nn/loss.h"
#include "nn/module.h"

namespace lockstep {

class NcclCommunicator;

// Loss, correct predictions and samples, summed locally, reduced over ranks.
struct Sums {
  double loss = 0, correct = 0, count = 0;
  void add(const LossStats& s);
  Sums reduced(Communicator& comm, CollectiveTracker& tracker, CollectiveKind kind) const;  // collective
  double mean_loss() const { return count > 0 ? loss / count : 0.0; }
  double acc() const { return count > 0 ? correct / count : 0.0; }
};

// Sums batch norm statistics over the ranks for --sync-batchnorm. On the CPU
// (and on GPUs with --comm mpi) through the host communicator: gradient
// buckets travel on the communication thread's own duplicate communicator, so
// the two never mix. With `nccl` (GPUs, --comm nccl) statistics in device
// memory are summed by NCCL on its stream, ordered against the compute stream
// by events: no host wait, no copies. NCCL runs the calls in the order the
// training thread queues them, batch-norm sums and gradient buckets alike, the
// same order on every rank.
class CommStatsReducer final : public StatsReducer {
 public:
  CommStatsReducer(Communicator& comm, CollectiveTracker& tracker, NcclCommunicator* nccl = nullptr);
  ~CommStatsReducer() override;
  CommStatsReducer(const CommStatsReducer&) = delete;
  CommStatsReducer& operator=(const CommStatsReducer&) = delete;

  void sum(double* values, int64_t n) override;
  bool sum_on_device(cuda::Context& gpu, double* values, int64_t n) override;

 private:
  Communicator& comm_;
  CollectiveTracker& tracker_;
  NcclCommunicator* nccl_;
  Tensor buf_;  // [>= n] F64, reused
  struct Events;  // nccl: compute -> NCCL stream and back (CUDA builds)
  std::unique_ptr<Events> events_;
};

}  // namespace lockstep
