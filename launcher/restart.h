// lockstep-run's restart supervisor: runs the job and, when it fails at run
// time and --max-restarts allows, starts it again from its newest checkpoint
// on the hosts that remain.
//
// After a failed attempt: every process of it is ended and confirmed gone
// (found by the job's LOCKSTEP_RUN_CONTROL token in their environment, on
// this machine and, over ssh, on every reachable host); the hosts are checked
// again (ssh port, trainer build) and those that fail are left out; the world
// size is chosen (restart_plan.h: the global batch kept); after a back-off
// (--restart-backoff, doubled each restart, at most 30 s) the trainer starts
// again with --resume and LOCKSTEP_RUN_ATTEMPT (job_control.h) describing the
// failure. Each failed attempt is one line on stderr; the first step of the
// next attempt is another (steps recomputed, seconds since the failure was
// seen). Exit codes 0, 2, 75, 126/127 and a signal to lockstep-run end the
// job at once (restart_plan.h); a spent budget or too few slots end it with
// one line holding every attempt's history, and the last attempt's exit code.
#pragma once

#include "launch.h"

namespace lockstep {

struct RestartOptions {
  int max_restarts = 0;   // restarts for the whole job (0: a failure ends it)
  int min_np = 1;         // fewest ranks a restart may run with
  double backoff_s = 1;   // before the first restart
};

// Runs the job under supervise() and restarts it as above. Returns the exit code.
int run_job(LaunchConfig config, const RestartOptions& restart, double abort_grace_s, bool verbose);

}  // namespace lockstep
