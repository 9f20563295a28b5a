// CommStatsReducer: the StatsReducer (ops/batchnorm/stats_reducer.h) of
// --sync-batchnorm over a job's ranks. On the CPU (and on GPUs without NCCL)
// through the host communicator: gradient buckets travel on the bucket
// reducer's own duplicate communicator, so the two never mix. With `nccl`
// (GPUs, --comm nccl) statistics in device memory are summed by NCCL on its
// stream, ordered against the compute stream by events: no host wait, no
// copies. NCCL runs the calls in the order the training thread queues them,
// batch-norm sums and gradient buckets alike, the same order on every rank.
// Every call reports itself to the tracker (CollectiveKind::BatchNormSync).
#pragma once

#include <memory>

#include "comm/collective_tracker.h"
#include "comm/communicator.h"
#include "ops/batchnorm/stats_reducer.h"
#include "tensor/tensor.h"

namespace lockstep {

class NcclCommunicator;

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
