// Compute and loader thread counts from the host's cores, and --overlap auto
// (thread_counts.h).
#include "thread_counts.h"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>

namespace lockstep {

std::vector<int> affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int i = 0; i < CPU_SETSIZE; ++i)
      if (CPU_ISSET(i, &set)) cpus.push_back(i);
  return cpus;
}

int available_cores() {
  const std::vector<int> cpus = affinity_cpus();
  if (!cpus.empty()) return static_cast<int>(cpus.size());
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

ThreadCounts thread_counts(const TrainConfig& c, int local_ranks, int cores) {
  const int per_rank = std::max(1, cores / std::max(1, local_ranks));
  ThreadCounts t;
  t.compute = c.threads > 0 ? c.threads : per_rank;
  t.loader = c.loader_threads > 0 ? c.loader_threads : c.device == DeviceKind::Cuda ? std::clamp(per_rank - 1, 1, 4) : 1;
  return t;
}

OverlapChoice choose_overlap(Switch mode, const OverlapSite& s) {
  if (mode != Switch::Auto) return {mode == Switch::On, ""};
  if (s.world <= 1) return {true, ""};  // nothing is reduced
  if (s.gpu) return {true, "the GPU computes; NCCL reduces on a stream of its own"};
  if (s.hosts > 1) return {true, "gradients cross hosts: the link's time hides behind backward"};
  const std::string threads =
      fmt::format("this host's {} rank{} run {} compute thread{}", s.host_ranks, s.host_ranks == 1 ? "" : "s",
                  s.host_threads, s.host_threads == 1 ? "" : "s");
  if (s.host_threads < s.host_cores)
    return {true, fmt::format("{} on {} cores: {} free for communication", threads, s.host_cores,
                              s.host_cores - s.host_threads)};
  return {false, fmt::format("{} on {} core{}: a communication thread would compete with backward", threads,
                             s.host_cores, s.host_cores == 1 ? "" : "s")};
}

}  // namespace lockstep
