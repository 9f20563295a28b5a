// How many threads a rank uses: compute threads (--threads) and the threads
// assembling its batches (--loader-threads, data/loader.h), from the cores
// this process may run on, shared among the ranks on its host; and whether
// its gradient buckets are reduced during backward (--overlap auto).
#pragma once

#include <string>
#include <vector>

#include "options.h"

namespace lockstep {

struct ThreadCounts {
  int compute = 1;
  int loader = 1;
};

// Cores in this process's affinity mask (at least 1), and their CPU numbers.
int available_cores();
std::vector<int> affinity_cpus();

// --threads 0: cores / local ranks. --loader-threads 0: 1 on the CPU (the
// compute threads take the cores); with --device cuda the GPU computes, so
// the rank's cores minus one (its training thread), between 1 and 4.
ThreadCounts thread_counts(const TrainConfig& c, int local_ranks, int cores = available_cores());

// Where the job runs, as far as --overlap auto cares.
struct OverlapSite {
  bool gpu = false;      // --device cuda: the GPU computes, NCCL reduces on its own stream
  int world = 1;         // ranks in the job
  int hosts = 1;         // hosts in the job
  int host_ranks = 1;    // ranks on this host
  int host_threads = 1;  // their compute threads, together (ThreadCounts::compute each)
  int host_cores = 1;    // the cores they may run on: the union of their affinity masks (a
                         // rank bound to one core can run its communication thread there only)
};

struct OverlapChoice {
  bool on = true;
  std::string why;  // auto's reason, for the log; empty when set by hand or nothing is reduced
};

// --overlap on|off as given; auto: on on the GPU, when gradients cross hosts
// (the reduction waits on the link, and overlap hides that wait: keras-cnn
// at 1 Gbit/s, 3,715 against 2,755 img/s, docs/performance.md) and where a
// core is free for the communication threads; off when the host's ranks'
// compute threads fill its cores, where the shared-memory reduction is CPU
// work that only competes with backward.
OverlapChoice choose_overlap(Switch mode, const OverlapSite& site);

}  // namespace lockstep
