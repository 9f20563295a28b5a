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
// network is over by then), then test at growing intervals up to kMaxNap.
// Measured across two namespace hosts on 2 cores, 1 Gbit/s link (2026-11-23):
// keras-cnn with 1 MB buckets 85.5 -> 72.4 ms per step, resnet50 at 64x64
// 1332 -> 1153 ms; no change through shared memory (bench_allreduce --path
// ordered, 4 B to 64 MB) or when nothing overlaps (docs/performance.md).
void wait_all(MPI_Request* reqs, int count) {
  using clock = std::chrono::steady_clock;
  constexpr auto kSpin = std::chrono::microseconds(200);
  constexpr auto kMaxNap = std::chrono::microseconds(50);
  const auto start = clock::now();
  auto nap = std::chrono::microseconds(5);
  for (;;) {
    int done = 0;
    LS_MPI(MPI_Testall(count, reqs, &done, MPI_STATUSES_IGNORE));
    if (done) return;
    if (clock::now() - start < kSpin) continue;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, kMaxNap);
  }
}

}  // namespace lockstep
