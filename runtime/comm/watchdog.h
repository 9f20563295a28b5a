// Watchdog: notices a collective that is overdue on this rank, finds which
// ranks never arrived, and hands one clear message to the launcher, which
// ends the job. It never depends on the stuck collective:
//
//   - its own duplicate of the communicator, used only for small
//     non-blocking point-to-point reports on a thread of its own;
//   - every rank reports its CollectivePosition to rank 0 four times a
//     second, and rank 0 reports its own to every rank;
//   - rank 0, when its current collective is older than the timeout, names
//     each rank that is behind (a lower collective sequence number) or that
//     it has not heard from for the timeout:
//       rank 3 (host h, pid p) has not reached step 812 allreduce bucket 7
//       after 300 s; last seen at step 811 in allreduce bucket 7, 300.2 s ago
//   - any other rank waits a few seconds longer (rank 0 normally speaks
//     first) and then reports what it knows: rank 0's position, or that rank
//     0 has gone quiet.
//
// A frozen rank (SIGSTOP), a rank stuck in compute, a lost host (cut link),
// a rank that died under a launcher that does not kill the job: all end as a
// timeout with the ranks named. While a stop is pending, a stuck collective
// with a silent peer ends the job after Options::stopping_timeout_s. Needs
// MPI_THREAD_MULTIPLE (the reports run beside the collectives); with less,
// the watchdog still times out locally but cannot name other ranks.
#pragma once

#include <mpi.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "comm/collective_tracker.h"

namespace lockstep {

class MpiCommunicator;

class Watchdog {
 public:
  struct Options {
    double timeout_s = 300;      // a collective older than this ends the job
    double report_every_s = 0.25;
    double grace_s = 3;          // extra wait on ranks other than 0 before they speak
    bool peer_reports = true;    // false without MPI_THREAD_MULTIPLE: local detection only
    // A stop was requested (SIGTERM/SIGUSR1): the ranks must reach the next
    // step boundary to checkpoint. If instead this rank's collective waits
    // longer than stopping_timeout_s while a rank it watches is silent (a
    // dead peer: SLURM then SIGTERMs the survivors and SIGKILLs them only
    // after KillWait), the job ends now rather than wait for the timeout.
    std::function<bool()> stopping;
    double stopping_timeout_s = 5;
  };
  // Called once, on the watchdog thread, with the message; must end the
  // process (the launcher logs it and calls MPI_Abort).
  using OnTimeout = std::function<void(const std::string&)>;

  // Collective over `comm` (learns every rank's host and pid).
  Watchdog(MpiCommunicator& comm, const CollectiveTracker& tracker, Options options, OnTimeout on_timeout);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // The message for an overdue collective, from a table of every rank's last
  // report (exposed for tests). `mine` is this rank's position, `heard_s_ago`
  // seconds since each rank's last report (0 for this rank).
  static std::string diagnose(int me, const CollectivePosition& mine, double overdue_s,
                              const std::vector<CollectivePosition>& table, const std::vector<double>& heard_s_ago,
                              const std::vector<std::string>& where, double timeout_s,
                              const std::string& reason = "");

 private:
  void run();

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  const CollectiveTracker& tracker_;
  Options options_;
  OnTimeout on_timeout_;
  std::vector<std::string> where_;  // "host h, pid p" per rank
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace lockstep
