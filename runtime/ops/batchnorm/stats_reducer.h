// StatsReducer: the interface synchronised batch normalisation sums its
// per-channel statistics through (ops/batchnorm/batchnorm.h);
// CommStatsReducer implements it over the job's communicator, and NCCL on a
// GPU (comm/stats_reducer.h).
#pragma once

#include <cstdint>

namespace lockstep {

namespace cuda {
class Context;
}

// Sums a few per-channel statistics over the ranks of a job (synchronised
// batch normalisation); the trainer provides one when --sync-batchnorm is on.
// Every rank calls it at the same points, as with any collective.
class StatsReducer {
 public:
  virtual ~StatsReducer() = default;
  // `n` doubles of host memory, in place.
  virtual void sum(double* values, int64_t n) = 0;
  // `n` doubles of GPU memory, in place, ordered on gpu's stream with no host
  // wait (NCCL). False when this reducer cannot (the caller then goes
  // through the host with sum()); nothing has been queued in that case.
  virtual bool sum_on_device(cuda::Context& gpu, double* values, int64_t n) {
    (void)gpu, (void)values, (void)n;
    return false;
  }
};

}  // namespace lockstep
