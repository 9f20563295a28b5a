// lockstep-run's mpirun, run as a child and watched instead of exec'd.
//
// mpirun stays in lockstep-run's process group (so a terminal's Ctrl-C and
// stdin reach it as before); signals sent to lockstep-run with kill (SIGTERM,
// SIGINT, SIGHUP, SIGUSR1, SIGUSR2) are passed on to it. When a rank reports
// through the abort channel (job_control.h) that it is ending the job and
// mpirun has not exited `abort_grace_s` later — Open MPI waits forever for
// the daemon of a host whose link is gone — lockstep-run prints one line,
// kills mpirun and every process under it (its ssh sessions, local ranks) and
// exits with the code the rank reported.
#pragma once

#include <string>
#include <vector>

#include "job_control.h"

namespace lockstep {

// Returns the exit code: mpirun's, 128 + signal when it was killed by one, or
// the reported code when it had to be ended; 127 when it cannot be started.
int supervise(const std::vector<std::string>& argv, AbortListener* listener, double abort_grace_s);

}  // namespace lockstep
