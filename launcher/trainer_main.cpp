// trainer: the command-line entry point, one process per rank.
//
//   1. local setup on every rank (options, data, model; rank 0 reads weights
//      and checkpoints), no collectives, errors caught;
//   2. every rank learns every rank's outcome (one allgather): if any failed,
//      rank 0 prints each distinct error once and all ranks exit with the same
//      code (no hang, no abort banner);
//   3. preflight: fingerprints compared; any difference ends every rank with a
//      table of what differs;
//   4. rank 0's state is broadcast and training runs. A rank that fails from
//      here on waits up to kEveryRankFailedWaitS for the others in a
//      non-blocking barrier of its own communicator. If every rank arrives
//      (they all failed: a batch too large for every rank's memory, say) and
//      all entered the same collectives, rank 0 prints each distinct error
//      once and all exit with the code, as in 2. Otherwise the ranks still
//      training wait in a collective for the failed one, so it logs its error
//      and ends the whole job (MPI_Abort).
// A watchdog thread (comm/watchdog.h) ends the job when a collective waits
// longer than --collective-timeout, naming the ranks that never arrived.
// SIGTERM/SIGUSR1 stop every rank at the next step boundary with a checkpoint.
// Exit codes: 0 success, 1 internal error, 2 bad input (flags, environment,
// files) or ranks started differently, 3 collective timeout (watchdog),
// 4 replicas diverged (--check-replicas-every),
// 75 stopped by SIGTERM/SIGUSR1 after writing a checkpoint (--resume continues).
#include <spdlog/spdlog.h>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <iostream>
#include <sstream>
#include <thread>

#include "comm/mpi_communicator.h"
#include "comm/mpi_session.h"
#include "comm/watchdog.h"
#include "core/blas_kernels.h"
#include "core/error.h"
#include "core/logging.h"
#include "input_names.h"
#include "job_control.h"
#include "options.h"
#include "preflight.h"
#include "rank_errors.h"
#include "stop_signals.h"
#include "trainer.h"

namespace {

constexpr int kInternalError = 1;
constexpr int kBadInput = 2;
constexpr int kCollectiveTimeout = 3;
// How long a rank that failed during training waits to learn whether every
// rank failed. Ranks failing at the same step (the same batch too large) meet
// within a fraction of that; a rank failing alone ends the job this much later.
constexpr double kEveryRankFailedWaitS = 5;

using Outcome = lockstep::RankOutcome;

// Thrown on every rank when the preflight fingerprints differ (rank 0 has
// printed the table already).
struct PreflightMismatch {};

// Input errors read as the trainer's user set the input (input_names.h).
template <typename Fn>
Outcome capture(const lockstep::TrainConfig& config, Fn&& fn) {
  try {
    fn();
    return {};
  } catch (const lockstep::InputError& e) {
    return {kBadInput, lockstep::user_message(e, config)};
  } catch (const lockstep::ReplicasDiverged& e) {
    return {lockstep::kExitReplicasDiverged, e.what()};
  } catch (const lockstep::OutOfMemory& e) {  // outside the training steps (a dataset, say): no batch to name
    return {kBadInput, e.message()};
  } catch (const lockstep::Error& e) {
    return {kInternalError, e.what()};
  } catch (const std::exception& e) {
    return {kInternalError, e.what()};
  } catch (const PreflightMismatch&) {
    return {kBadInput, ""};
  }
}

// Collective. Returns the job's exit code (0 if every rank succeeded); rank 0
// prints each error once (rank_errors.h).
int agree(lockstep::Communicator& comm, const Outcome& mine, const lockstep::Logger& log) {
  const auto all = lockstep::allgather_strings(comm, std::to_string(mine.code) + "\t" + mine.message);
  std::vector<lockstep::RankOutcome> by_rank;
  for (const std::string& s : all) {
    const size_t tab = s.find('\t');
    by_rank.push_back({std::stoi(s.substr(0, tab)), s.substr(tab + 1)});
  }
  if (comm.rank() == 0)
    for (const std::string& line : lockstep::rank_error_lines(by_rank)) log->error("{}", line);
  return lockstep::job_exit_code(by_rank);
}

// Collective over `comm` for the ranks that call it: true once every rank has
// called it, false if some rank has not after `wait_s` (a non-blocking
// barrier, left pending then: the caller ends the job).
bool every_rank_failed(const lockstep::MpiCommunicator& comm, double wait_s) {
  MPI_Request req = MPI_REQUEST_NULL;
  if (MPI_Ibarrier(comm.handle(), &req) != MPI_SUCCESS) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  while (true) {
    int done = 0;
    if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (done) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

int main(int argc, char** argv) {
  lockstep::use_fast_blas_kernels(argv);  // may re-execute this process, so first
  std::unique_ptr<lockstep::MpiSession> mpi;
  std::unique_ptr<lockstep::Communicator> comm;
  try {
    mpi = std::make_unique<lockstep::MpiSession>(&argc, &argv);
    comm = mpi->world();
    if (comm->size() == 1) comm = std::make_unique<lockstep::SingleProcessCommunicator>();
  } catch (const std::exception& e) {
    std::cerr << "error: cannot start MPI: " << e.what() << std::endl;
    return kInternalError;
  }
  const int rank = comm->rank(), world = comm->size();
  lockstep::Logger log = lockstep::make_logger(rank, world, false);

  // 1. Local setup.
  lockstep::TrainConfig config;
  std::unique_ptr<lockstep::Trainer> trainer;
  bool exit_early = false;
  const Outcome setup = capture(config, [&] {
    // Only rank 0 prints --help/--version; every rank parses the same arguments.
    std::ostringstream sink;
    struct Restore {  // puts std::cout back however parsing ends
      std::streambuf* saved;
      ~Restore() {
        if (saved) std::cout.rdbuf(saved);
      }
    } restore{rank == 0 ? nullptr : std::cout.rdbuf(sink.rdbuf())};
    const auto outcome = lockstep::parse_train_options(argc, argv, config);
    if (outcome == lockstep::ParseOutcome::Exit) {
      exit_early = true;
      return;
    }
    log = lockstep::make_logger(rank, world, config.log_all_ranks, spdlog::level::from_str(config.log_level));
    // MPI calls must then stay on the main thread (the CPU path's buckets run
    // on a communication thread; NCCL's are queued by the main thread).
    if (!mpi->thread_multiple() && config.device != lockstep::DeviceKind::Cuda)
      config.overlap = lockstep::Switch::Off;
    lockstep::validate_train_config(config, rank == 0);
    trainer = std::make_unique<lockstep::Trainer>(config, *comm, log);
    trainer->setup();
  });
  // 2. Everyone learns everyone's outcome.
  const int code = agree(*comm, setup, log);
  if (code != 0) return code;
  if (exit_early) return 0;
  if (!mpi->thread_multiple())
    log->info("MPI provides only {}: every MPI call stays on the main thread (no overlap)", mpi->thread_level_name());

  // 3 and 4: collective from here on. The ranks that fail during training
  // meet on a communicator of their own (4. above).
  std::unique_ptr<lockstep::Communicator> failed_comm = world > 1 ? comm->duplicate() : nullptr;
  lockstep::StopSignals signals;
  std::unique_ptr<lockstep::Watchdog> watchdog;
  std::unique_ptr<lockstep::LauncherReports> reports;  // rank 0 under lockstep-run
  lockstep::TrainSummary summary;
  const Outcome run = capture(config, [&] {
    const std::string diff = lockstep::preflight(*comm, trainer->fingerprint());
    if (!diff.empty()) {
      if (rank == 0)
        log->error("preflight check failed: the ranks were not started with the same setup\n{}",
                   diff.substr(0, diff.size() - 1));
      throw PreflightMismatch{};
    }
    auto* mpi_comm = dynamic_cast<lockstep::MpiCommunicator*>(comm.get());
    if (mpi_comm && config.collective_timeout_s > 0) {
      lockstep::Watchdog::Options wo;
      wo.timeout_s = config.collective_timeout_s;
      wo.peer_reports = mpi->thread_multiple();
      wo.stopping = [&signals] { return signals.pending() != 0; };
      watchdog = std::make_unique<lockstep::Watchdog>(*mpi_comm, trainer->tracker(), wo, [&log](const std::string& m) {
        log->error("{}", m);
        log->flush();
        lockstep::notify_launcher_of_abort(kCollectiveTimeout, m);  // lockstep-run ends an mpirun that hangs on
        lockstep::MpiSession::abort(kCollectiveTimeout);
      });
    }
    trainer->set_stop_source([&signals] { return signals.pending(); });
    if (rank == 0) {
      reports = lockstep::LauncherReports::connect();
      trainer->set_launcher_reports(reports.get());
    }
    trainer->start();
    summary = trainer->run();
  });
  watchdog.reset();
  if (run.code == 0) return summary.stopped_by != 0 ? lockstep::kExitPreempted : 0;
  if (run.message.empty()) return run.code;  // preflight: every rank saw the same table, all exit together
  if (run.code == lockstep::kExitReplicasDiverged) {  // every rank found it in the same reduction: no abort
    if (rank == 0) log->error("{}", run.message);
    return run.code;
  }
  const auto* failed_mpi = dynamic_cast<const lockstep::MpiCommunicator*>(failed_comm.get());
  // Half the watchdog's timeout at most, so the failed rank speaks before the
  // others' watchdogs name it as missing.
  const double wait_s = config.collective_timeout_s > 0
                            ? std::min(kEveryRankFailedWaitS, 0.5 * config.collective_timeout_s)
                            : kEveryRankFailedWaitS;
  if (failed_mpi && every_rank_failed(*failed_mpi, wait_s)) {
    // Ending normally joins this rank's communication: safe only where every
    // rank entered the same collectives (any still in flight then completes).
    const auto seqs = lockstep::allgather_strings(*failed_comm, std::to_string(trainer->tracker().position().seq));
    if (std::all_of(seqs.begin(), seqs.end(), [&](const std::string& q) { return q == seqs.front(); }))
      return agree(*failed_comm, run, log);
  }
  log->error("{}{}", world > 1 && rank == 0 ? "[rank 0] " : "", run.message);
  if (world > 1) {
    lockstep::notify_launcher_of_abort(run.code, run.message);
    lockstep::MpiSession::abort(run.code);
  }
  return run.code;
}
