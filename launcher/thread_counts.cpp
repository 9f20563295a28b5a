// Compute and loader thread counts from the host's cores (thread_counts.h).
#include "thread_counts.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>

namespace lockstep {

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

ThreadCounts thread_counts(const TrainConfig& c, int local_ranks, int cores) {
  const int per_rank = std::max(1, cores / std::max(1, local_ranks));
  ThreadCounts t;
  t.compute = c.threads > 0 ? c.threads : per_rank;
  t.loader = c.loader_threads > 0 ? c.loader_threads : c.device == "cuda" ? std::clamp(per_rank - 1, 1, 4) : 1;
  return t;
}

}  // namespace lockstep
