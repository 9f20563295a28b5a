// lockstep-run's decisions, kept apart from process handling so they can be
// tested: which launcher to use, and the exact command line it gets.
//
// mpirun: -np N, the hosts (-H or --hostfile), --map-by slot (ranks fill a
// host's slots in order, so local ranks are consecutive), --bind-to none
// (each rank runs several compute threads; Open MPI's default core binding
// would pin them all to one core when there are few ranks), ssh options for
// Open MPI's launch agent, the network interface for MPI's TCP transports and
// NCCL, and -x for every LOCKSTEP_*, NCCL_* and OMPI_* variable set here.
// srun (inside a SLURM allocation): --mpi=pmix, -n N when given; srun passes
// the whole environment.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hosts.h"

namespace lockstep {

struct LaunchConfig {
  int np = 0;                     // 0: every slot of the hosts (mpirun) or the allocation (srun)
  std::vector<Host> hosts;        // -H or --hostfile; empty: this host
  std::string hostfile;           // the --hostfile path, when given
  std::string network_interface;
  std::string launcher = "auto";  // auto | mpirun | srun
  int ssh_port = 0;               // 0: ssh's default
  std::string ssh_identity_file;
  std::string ssh_options;        // extra ssh options, as one string
  std::string mpirun_args;        // extra mpirun arguments, as one string
  bool dry_run = false;
  bool check = false;
  std::vector<std::string> command;  // the trainer and its arguments
};

// The environment lockstep-run acts on, read in one place (capture_environment).
struct LaunchEnvironment {
  std::optional<std::string> slurm_job_id;
  std::vector<std::string> forwarded;  // names of set LOCKSTEP_*, NCCL_*, OMPI_* variables
  bool root = false;                   // running as root (mpirun then needs --allow-run-as-root)
};

LaunchEnvironment capture_environment();

struct LaunchCommand {
  std::string launcher;                                   // "mpirun" or "srun"
  std::vector<std::string> argv;                          // argv[0] is the launcher
  std::vector<std::pair<std::string, std::string>> env;   // variables to set before exec
};

// Throws InputError for combinations that cannot work.
LaunchCommand build_launch(const LaunchConfig& config, const LaunchEnvironment& env);

// The ssh options every ssh lockstep-run or Open MPI makes uses: BatchMode
// (never prompt), ConnectTimeout=5 (fail fast), then port, identity, extras.
std::vector<std::string> ssh_options(const LaunchConfig& config);

// Words as a shell would need them (quoted where necessary), joined by spaces.
std::string shell_join(const std::vector<std::string>& words);
// Splits a string on whitespace, honouring single and double quotes.
std::vector<std::string> shell_split(const std::string& text);

}  // namespace lockstep
