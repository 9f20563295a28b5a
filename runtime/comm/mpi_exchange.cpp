// wait_all: spin briefly, then nap between tests.
#include "comm/mpi_exchange.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace lockstep {

// Waits for `reqs` without holding a core for the whole transfer. Open MPI's
// blocking waits poll for as long as the data takes (its progress loop in
// user time, epoll in system time): on a slow link that is most of a step,
// taken from the compute threads that backward runs on while buckets are
// reduced. So: poll for kSpin (an exchange through shared memory or a fast
// network is over by then), then test at intervals of an eighth of the time
// waited so far, at most kMaxNap.
// Measured across two namespace hosts on 2 cores, 1 Gbit/s link (2026-11-23):
// keras-cnn with 1 MB buckets 85.5 -> 72.4 ms per step, resnet50 at 64x64
// 1332 -> 1153 ms; no change through shared memory (bench_allreduce --path
// ordered, 4 B to 64 MB) or when nothing overlaps (docs/performance.md).
// The naps used to double from 5 to at most 50 us. Once ZeRO-1's parameter
// allgather also waited on a thread (comm/parameter_gather.h), 4 ranks on 2
// cores across two namespace hosts had about one run in four with a step
// that stalled for 2 to 47 s, at twice the interrupts and three times the
// context switches per second of 1 ms naps, which had no stall in 24 runs.
// An eighth of the wait keeps long waits at 1 ms and short ones prompt
// (2026-11-24, docs/benchmarks.md).
void wait_all(MPI_Request* reqs, int count) {
  using clock = std::chrono::steady_clock;
  using us = std::chrono::microseconds;
  constexpr us kSpin(200), kMinNap(5), kMaxNap(1000);
  const auto start = clock::now();
  for (;;) {
    int done = 0;
    LS_MPI(MPI_Testall(count, reqs, &done, MPI_STATUSES_IGNORE));
    if (done) return;
    const auto waited = std::chrono::duration_cast<us>(clock::now() - start);
    if (waited < kSpin) continue;
    // An eighth of the wait so far: it ends at most ~12% late.
    std::this_thread::sleep_for(std::clamp(waited / 8, kMinNap, kMaxNap));
  }
}

}  // namespace lockstep
