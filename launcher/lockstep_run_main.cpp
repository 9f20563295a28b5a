// lockstep-run: starts a lockstep job, in the spirit of horovodrun.
//
//   lockstep-run [options] TRAINER [TRAINER ARGS...]
//   lockstep-run [options] -- TRAINER [TRAINER ARGS...]
//
// Its own options come first; the first word that is not one of them (or
// everything after "--") is the command. It checks the hosts (names resolve,
// ssh ports answer), builds the mpirun or srun command (launch.h) and execs
// runs it; the job's exit code is lockstep-run's. --dry-run prints the command
// instead; --check prints a table of each host's ssh and trainer build.
// mpirun runs as a watched child (supervise.h): when a rank reports that it is
// ending the job and mpirun does not exit within --abort-grace seconds (a host
// whose link is gone), lockstep-run ends it. With --max-restarts a job that
// fails at run time is started again from its newest checkpoint on the hosts
// that remain (restart.h). srun is exec'd (SLURM ends a step whose node is
// lost) unless restarts are asked for; then it is watched like mpirun.
// Exit codes: the job's; 2 for bad input or failed checks; 127 when the
// launcher cannot be started.
#include <unistd.h>

#include <cxxopts.hpp>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>

#include "build_id.h"
#include "core/error.h"
#include "host_check.h"
#include "hosts.h"
#include "job_control.h"
#include "launch.h"
#include "restart.h"
#include "restart_plan.h"

namespace {

namespace fs = std::filesystem;
using lockstep::InputError;
using lockstep::LaunchConfig;

constexpr int kBadInput = 2;
constexpr int kCannotExec = 127;
constexpr double kProbeSeconds = 3;

// Options that take a value, as written on the command line.
const std::set<std::string> kValueOptions = {"-np", "-n", "--np", "-H", "--hosts", "--hostfile",
                                             "--network-interface", "--launcher", "--ssh-port",
                                             "--ssh-identity-file", "--ssh-options", "--mpirun-args",
                                             "--abort-grace", "--max-restarts", "--min-np", "--restart-backoff"};

cxxopts::Options make_options() {
  cxxopts::Options o("lockstep-run",
                     "lockstep-run: start a lockstep job with mpirun (or srun inside a SLURM allocation).\n"
                     "  lockstep-run [options] TRAINER [ARGS...]      e.g. lockstep-run -np 4 -H a:2,b:2 ./trainer "
                     "--model lenet\n"
                     "Options come before the command; \"--\" may separate them.");
  o.custom_help("[options]").positional_help("TRAINER [ARGS...]");
  o.add_options()
      ("n,np", "number of processes (default: every slot of the hosts; inside SLURM, the allocation's tasks)",
       cxxopts::value<std::string>())
      ("H,hosts", "hosts and their slots: host1:2,host2:2 (no count: 1 slot)", cxxopts::value<std::string>())
      ("hostfile", "Open MPI hostfile: one 'host slots=N' per line, # comments", cxxopts::value<std::string>())
      ("network-interface", "network interface for MPI's TCP transports and NCCL_SOCKET_IFNAME (e.g. eth0)",
       cxxopts::value<std::string>())
      ("launcher", "auto (srun inside a SLURM allocation, else mpirun), mpirun or srun",
       cxxopts::value<std::string>()->default_value("auto"))
      ("ssh-port", "ssh port of the hosts", cxxopts::value<std::string>())
      ("ssh-identity-file", "ssh private key", cxxopts::value<std::string>())
      ("ssh-options", "more ssh options, as one string (e.g. \"-F cluster_ssh_config\")",
       cxxopts::value<std::string>())
      ("mpirun-args", "more mpirun arguments, as one string", cxxopts::value<std::string>())
      ("abort-grace", "seconds mpirun gets to exit after a rank ends the job before lockstep-run ends it (default 5)",
       cxxopts::value<std::string>())
      ("max-restarts", "restarts after a run-time failure, for the whole job (default 0): from the newest "
       "checkpoint in the trainer's --checkpoint-dir, on the hosts that still pass the checks, with the global "
       "batch kept", cxxopts::value<std::string>())
      ("min-np", "fewest processes a restart may use (default 1)", cxxopts::value<std::string>())
      ("restart-backoff", "seconds before the first restart, doubled for each later one up to 30 (default 1)",
       cxxopts::value<std::string>())
      ("dry-run", "print the command and exit (no host checks)")
      ("check", "check every host: ssh reachable, same trainer build; print a table and exit")
      ("verbose", "print the command before running it")
      ("h,help", "print this help")
      ("version", "print the version");
  return o;
}

int whole_number(const char* flag, const std::string& text, int max) {
  int v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  LS_CHECK_INPUT(ec == std::errc() && p == end && v >= 1 && v <= max, "{}: '{}' is not a whole number from 1 to {}",
                 flag, text, max);
  return v;
}

struct Split {
  std::vector<std::string> own;      // lockstep-run's arguments (argv[0] first)
  std::vector<std::string> command;  // the trainer and its arguments
};

// Options first, then the command: the first word that is neither an option
// nor an option's value, or everything after "--".
Split split_arguments(int argc, char** argv) {
  Split s;
  s.own.push_back(argv[0]);
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.empty() || a[0] != '-') break;
    s.own.push_back(a == "-np" ? "--np" : a);  // horovodrun and mpirun spell it -np
    if (kValueOptions.count(a) && i + 1 < argc) s.own.push_back(argv[++i]);
  }
  for (; i < argc; ++i) s.command.push_back(argv[i]);
  return s;
}

// The command's program as an absolute path (every host then starts the same
// file), checked here: a path must be an executable file, a bare name must be
// on PATH.
std::string resolve_program(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    std::error_code ec;
    const fs::path p = fs::absolute(program, ec);
    LS_CHECK_INPUT(fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0, "command: {} is not an executable file",
                   program);
    return p.lexically_normal().string();
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  for (size_t start = 0; start <= dirs.size();) {
    const size_t colon = dirs.find(':', start);
    const std::string dir = dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    const fs::path p = fs::path(dir.empty() ? "." : dir) / program;
    std::error_code ec;
    if (fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0) return program;  // remote hosts search their PATH
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  LS_INPUT_ERROR("command: '{}' is not on PATH (give its path, e.g. ./build/{})", program, program);
}

bool on_path(const std::string& program) {
  try {
    resolve_program(program);
    return true;
  } catch (const InputError&) {
    return false;
  }
}

// The trainer next to lockstep-run (both are built into the same directory).
std::string sibling_trainer() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("trainer") : (self.parent_path() / "trainer").string();
}

double seconds(const char* flag, const std::string& text, double max) {
  double v = -1;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  LS_CHECK_INPUT(ec == std::errc() && p == text.data() + text.size() && v >= 0 && v <= max,
                 "{}: '{}' is not a number of seconds from 0 to {}", flag, text, max);
  return v;
}

struct Parsed {
  LaunchConfig config;
  lockstep::RestartOptions restart;
  double abort_grace_s = 5;
  bool help = false, version = false, verbose = false;
  std::string help_text;
};

Parsed parse(int argc, char** argv) {
  const Split split = split_arguments(argc, argv);
  cxxopts::Options options = make_options();
  std::vector<const char*> args;
  for (const auto& a : split.own) args.push_back(a.c_str());
  cxxopts::ParseResult r;
  try {
    r = options.parse(static_cast<int>(args.size()), args.data());
  } catch (const cxxopts::exceptions::exception& e) {
    std::string msg = e.what();
    for (const char* q : {"\u2018", "\u2019"})
      for (size_t p = msg.find(q); p != std::string::npos; p = msg.find(q)) msg.replace(p, std::strlen(q), "'");
    LS_INPUT_ERROR("{}", msg);
  }
  Parsed out;
  out.help = r.count("help") > 0;
  out.version = r.count("version") > 0;
  out.help_text = options.help();
  if (out.help || out.version) return out;
  LaunchConfig& c = out.config;
  if (r.count("np")) {
    c.np = whole_number("-np", r["np"].as<std::string>(), 65536);
  }
  LS_CHECK_INPUT(!(r.count("hosts") && r.count("hostfile")), "-H and --hostfile: give one or the other");
  if (r.count("hosts")) c.hosts = lockstep::parse_host_list(r["hosts"].as<std::string>());
  if (r.count("hostfile")) {
    c.hostfile = r["hostfile"].as<std::string>();
    c.hosts = lockstep::parse_hostfile(c.hostfile);
    c.hostfile = fs::absolute(c.hostfile).lexically_normal().string();
  }
  if (r.count("network-interface")) {
    c.network_interface = r["network-interface"].as<std::string>();
    LS_CHECK_INPUT(!c.network_interface.empty() && c.network_interface.find_first_of(" \t,") == std::string::npos,
                   "--network-interface: '{}' is not an interface name", c.network_interface);
  }
  c.launcher = r["launcher"].as<std::string>();
  if (r.count("ssh-port")) {
    c.ssh_port = whole_number("--ssh-port", r["ssh-port"].as<std::string>(), 65535);
  }
  if (r.count("ssh-identity-file")) {
    c.ssh_identity_file = r["ssh-identity-file"].as<std::string>();
    std::error_code ec;
    LS_CHECK_INPUT(fs::is_regular_file(c.ssh_identity_file, ec), "--ssh-identity-file: {} is not a file",
                   c.ssh_identity_file);
    c.ssh_identity_file = fs::absolute(c.ssh_identity_file).lexically_normal().string();
  }
  if (r.count("ssh-options")) c.ssh_options = r["ssh-options"].as<std::string>();
  if (r.count("mpirun-args")) c.mpirun_args = r["mpirun-args"].as<std::string>();
  if (r.count("abort-grace")) out.abort_grace_s = seconds("--abort-grace", r["abort-grace"].as<std::string>(), 3600);
  if (r.count("max-restarts")) {
    const std::string text = r["max-restarts"].as<std::string>();
    int v = -1;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    LS_CHECK_INPUT(ec == std::errc() && end == text.data() + text.size() && v >= 0 && v <= 1000,
                   "--max-restarts: '{}' is not a whole number from 0 to 1000", text);
    out.restart.max_restarts = v;
  }
  if (r.count("min-np")) out.restart.min_np = whole_number("--min-np", r["min-np"].as<std::string>(), 65536);
  if (r.count("restart-backoff"))
    out.restart.backoff_s = seconds("--restart-backoff", r["restart-backoff"].as<std::string>(), 3600);
  LS_CHECK_INPUT(!(c.np > 0 && out.restart.min_np > c.np), "--min-np {} is more than -np {}", out.restart.min_np,
                 c.np);
  c.dry_run = r.count("dry-run") > 0;
  c.check = r.count("check") > 0;
  out.verbose = r.count("verbose") > 0;
  LS_CHECK_INPUT(!(c.dry_run && c.check), "--dry-run and --check: give one or the other");
  c.command = split.command;
  return out;
}

int run(int argc, char** argv) {
  Parsed p = parse(argc, argv);
  if (p.help) {
    std::cout << p.help_text << std::endl;
    return 0;
  }
  if (p.version) {
    std::cout << "lockstep-run " << lockstep::build_id() << std::endl;
    return 0;
  }
  LaunchConfig& c = p.config;
  if (c.check) {
    const std::string trainer = c.command.empty() ? sibling_trainer() : resolve_program(c.command.front());
    return lockstep::check_hosts(c, c.hosts, trainer) ? 0 : kBadInput;
  }
  LS_CHECK_INPUT(!c.command.empty(), "no command to launch (usage: lockstep-run [options] TRAINER [ARGS...]; see --help)");
  c.command.front() = resolve_program(c.command.front());
  lockstep::LaunchCommand cmd = lockstep::build_launch(c, lockstep::capture_environment());
  if (c.dry_run) {
    for (const auto& [k, v] : cmd.env) std::cout << k << "=" << lockstep::shell_join({v}) << " ";
    std::cout << lockstep::shell_join(cmd.argv) << std::endl;
    return 0;
  }
  if (p.restart.max_restarts > 0)
    LS_CHECK_INPUT(lockstep::names_checkpoint_dir(c.command, std::getenv("LOCKSTEP_CHECKPOINT_DIR") != nullptr),
                   "--max-restarts: the command names no --checkpoint-dir (a restart resumes from its newest "
                   "checkpoint)");
  LS_CHECK_INPUT(on_path(cmd.launcher), "{} is not on PATH ({})", cmd.launcher,
                 cmd.launcher == "srun" ? "is SLURM installed here? or use --launcher mpirun"
                                        : "install Open MPI: scripts/setup.sh");
  if (cmd.launcher == "mpirun" && !c.hosts.empty())
    lockstep::require_reachable(c.hosts, lockstep::probe_hosts(c.hosts, c.ssh_port, kProbeSeconds));
  // mpirun is watched (supervise.h); srun is exec'd unless restarts are asked for.
  if (cmd.launcher == "mpirun" || p.restart.max_restarts > 0)
    return lockstep::run_job(c, p.restart, p.abort_grace_s, p.verbose);
  for (const auto& [k, v] : cmd.env) setenv(k.c_str(), v.c_str(), 1);
  if (p.verbose) std::cerr << "lockstep-run: " << lockstep::shell_join(cmd.argv) << std::endl;
  std::vector<char*> args;
  for (const auto& a : cmd.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  std::cerr << "lockstep-run: error: cannot run " << cmd.launcher << ": " << std::strerror(errno) << std::endl;
  return kCannotExec;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const InputError& e) {
    std::cerr << "lockstep-run: error: " << e.message() << std::endl;
    return kBadInput;
  } catch (const std::exception& e) {
    std::cerr << "lockstep-run: error: " << e.what() << std::endl;
    return 1;
  }
}
