// StopSignals: SIGTERM and SIGUSR1 (SLURM's --signal=USR1@N, a scheduler's
// preemption notice) become a request to stop at the next step boundary,
// where all ranks agree, write a checkpoint and exit with kExitPreempted.
// A second signal of either kind ends the process the default way, so a
// stuck process can still be terminated.
//
// A signal handler can only reach static storage: the pending signal lives in
// one lock-free std::atomic<int> in stop_signals.cpp, read through this class
// (from any thread).
#pragma once

namespace lockstep {

// The trainer's exit code after a requested stop (checkpoint written when
// --checkpoint-dir is set): 75, EX_TEMPFAIL, "try again" (--resume).
constexpr int kExitPreempted = 75;

class StopSignals {
 public:
  StopSignals();   // installs the handlers
  ~StopSignals();  // restores the previous ones
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The signal received (SIGTERM or SIGUSR1), or 0.
  int pending() const;
};

const char* signal_name(int sig);

}  // namespace lockstep
