// How many threads a rank uses: compute threads (--threads) and the threads
// assembling its batches (--loader-threads, data/loader.h), from the cores
// this process may run on, shared among the ranks on its host.
#pragma once

#include "options.h"

namespace lockstep {

struct ThreadCounts {
  int compute = 1;
  int loader = 1;
};

// Cores in this process's affinity mask (at least 1).
int available_cores();

// --threads 0: cores / local ranks. --loader-threads 0: 1 on the CPU (the
// compute threads take the cores); with --device cuda the GPU computes, so
// the rank's cores minus one (its training thread), between 1 and 4.
ThreadCounts thread_counts(const TrainConfig& c, int local_ranks, int cores = available_cores());

}  // namespace lockstep
