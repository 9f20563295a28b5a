// ThreadsGuard: sets the CPU ops' compute threads (core/cpu.h) for a scope and
// restores the previous count, so op tests can run on 1 and 2 threads.
#pragma once

#include "core/cpu.h"

namespace lockstep::testing {

class ThreadsGuard {
 public:
  explicit ThreadsGuard(int threads) : prev_(compute_threads()) { set_compute_threads(threads); }
  ~ThreadsGuard() { set_compute_threads(prev_); }
  ThreadsGuard(const ThreadsGuard&) = delete;
  ThreadsGuard& operator=(const ThreadsGuard&) = delete;

 private:
  int prev_;
};

}  // namespace lockstep::testing
