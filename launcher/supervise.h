// lockstep-run's mpirun (or srun, when restarts are asked for), run as a
// child and watched instead of exec'd.
//
// mpirun stays in lockstep-run's process group (so a terminal's Ctrl-C and
// stdin reach it as before); signals sent to lockstep-run with kill (SIGTERM,
// SIGINT, SIGHUP, SIGUSR1, SIGUSR2) are passed on to it. When a rank reports
// through the abort channel (job_control.h) that it is ending the job and
// mpirun has not exited `abort_grace_s` later — Open MPI waits forever for
// the daemon of a host whose link is gone — lockstep-run prints one line,
// kills mpirun and every process under it (its ssh sessions, local ranks) and
// exits with the code the rank reported. Rank 0's progress reports
// (job_control.h) are collected for the restart supervisor (restart.h).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "job_control.h"

namespace lockstep {

using SteadyClock = std::chrono::steady_clock;

// One attempt: how it ended and what its rank 0 reported.
struct AttemptOutcome {
  // The launcher's exit code, 128 + signal when it was killed by one, the
  // reported code when it had to be ended; 127 when it cannot be started.
  int exit_code = 0;
  std::optional<ControlEvent> abort;    // the first abort notice
  bool ended_by_launcher = false;       // mpirun ended after --abort-grace
  std::optional<ControlEvent> start;    // rank 0's "start" report
  int64_t last_step = -1;               // rank 0's last "step" report (-1: none)
  SteadyClock::time_point began;        // the launcher started
  SteadyClock::time_point failed_at;    // the first abort notice, else the exit
  std::optional<SteadyClock::time_point> first_step_at;  // rank 0's first "step" report
  int signal = 0;  // a signal lockstep-run received and passed on during the attempt (0: none)
};

// Runs argv to its end. `on_first_step` (may be empty) is called once, when
// rank 0 reports its first step.
AttemptOutcome supervise(const std::vector<std::string>& argv, AbortListener* listener, double abort_grace_s,
                         const std::function<void(const AttemptOutcome&)>& on_first_step = {});

// A signal received (SIGTERM, SIGINT, ...) while no attempt runs, and not yet
// taken; 0 when none. Sleeps up to `seconds` waiting for one.
int wait_for_signal(double seconds);

}  // namespace lockstep
