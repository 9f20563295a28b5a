// Launcher choice and command construction for lockstep-run.
#include "launch.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

extern char** environ;

namespace lockstep {
namespace {

// Variables Open MPI sets for its own processes: never forwarded.
bool mpi_internal(const std::string& name) {
  for (const char* p : {"OMPI_COMM_WORLD", "OMPI_UNIVERSE", "OMPI_FIRST_RANKS", "OMPI_APP_CTX", "OMPI_NUM_APP_CTX",
                        "OMPI_ARGV", "OMPI_FILE_LOCATION", "OMPI_MCA_orte_", "OMPI_MCA_ess", "OMPI_MCA_pmix",
                        "OMPI_MCA_initial_wdir", "OMPI_COMMAND", "OMPI_MCA_mpi_oversubscribe", "OMPI_MCA_shmem_RUNTIME"})
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

}  // namespace

LaunchEnvironment capture_environment() {
  LaunchEnvironment e;
  if (const char* job = std::getenv("SLURM_JOB_ID")) e.slurm_job_id = job;
  for (char** v = environ; v && *v; ++v) {
    const std::string kv = *v;
    const std::string name = kv.substr(0, kv.find('='));
    const bool ours = name.rfind("LOCKSTEP_", 0) == 0 || name.rfind("NCCL_", 0) == 0 ||
                      (name.rfind("OMPI_", 0) == 0 && !mpi_internal(name));
    if (ours) e.forwarded.push_back(name);
  }
  std::sort(e.forwarded.begin(), e.forwarded.end());
  e.root = geteuid() == 0;
  return e;
}

std::vector<std::string> ssh_options(const LaunchConfig& c) {
  std::vector<std::string> o{"-o", "BatchMode=yes", "-o", "ConnectTimeout=5"};
  if (c.ssh_port > 0) {
    o.push_back("-p");
    o.push_back(std::to_string(c.ssh_port));
  }
  if (!c.ssh_identity_file.empty()) {
    o.push_back("-i");
    o.push_back(c.ssh_identity_file);
  }
  for (auto& w : shell_split(c.ssh_options)) o.push_back(w);
  return o;
}

LaunchCommand build_launch(const LaunchConfig& c, const LaunchEnvironment& env) {
  LS_CHECK_INPUT(!c.command.empty(), "no command to launch (usage: lockstep-run [options] TRAINER [ARGS...])");
  LS_CHECK_INPUT(c.launcher == "auto" || c.launcher == "mpirun" || c.launcher == "srun",
                 "--launcher: '{}' is not one of auto, mpirun, srun", c.launcher);
  const bool in_slurm = env.slurm_job_id.has_value();
  std::string launcher = c.launcher == "auto" ? (in_slurm ? "srun" : "mpirun") : c.launcher;
  LaunchCommand out;
  out.launcher = launcher;
  if (launcher == "srun") {
    LS_CHECK_INPUT(in_slurm, "--launcher srun: not inside a SLURM allocation (SLURM_JOB_ID is not set)");
    LS_CHECK_INPUT(c.hosts.empty(),
                   "inside SLURM allocation {} srun runs on the allocation's nodes: drop -H/--hostfile, or use "
                   "--launcher mpirun",
                   *env.slurm_job_id);
    out.argv = {"srun", "--mpi=pmix", "--kill-on-bad-exit=1"};  // a rank that dies ends the step, as under mpirun
    if (c.np > 0) {
      out.argv.push_back("-n");
      out.argv.push_back(std::to_string(c.np));
    }
    if (!c.network_interface.empty()) {
      out.env.push_back({"NCCL_SOCKET_IFNAME", c.network_interface});
      out.env.push_back({"OMPI_MCA_btl_tcp_if_include", c.network_interface});
      out.env.push_back({"OMPI_MCA_oob_tcp_if_include", c.network_interface});
    }
    out.argv.insert(out.argv.end(), c.command.begin(), c.command.end());
    return out;
  }
  // mpirun
  int np = c.np;
  if (!c.hosts.empty()) {
    const int slots = total_slots(c.hosts);
    if (np == 0) np = slots;
    LS_CHECK_INPUT(np <= slots, "-np {} asks for more processes than the hosts have slots ({})", np, slots);
  }
  LS_CHECK_INPUT(np > 0 || in_slurm, "-np is needed when no hosts are given (-H or --hostfile)");
  out.argv = {"mpirun"};
  if (np > 0) {
    out.argv.push_back("-np");
    out.argv.push_back(std::to_string(np));
  }
  if (!c.hostfile.empty()) {
    out.argv.push_back("--hostfile");
    out.argv.push_back(c.hostfile);
  } else if (!c.hosts.empty()) {
    out.argv.push_back("-H");
    out.argv.push_back(format_host_list(c.hosts));
  }
  for (const char* a : {"--map-by", "slot", "--bind-to", "none"}) out.argv.push_back(a);
  if (env.root) out.argv.push_back("--allow-run-as-root");
  out.argv.push_back("--mca");
  out.argv.push_back("plm_rsh_args");
  out.argv.push_back(shell_join(ssh_options(c)));
  if (!c.network_interface.empty()) {
    for (const char* m : {"btl_tcp_if_include", "oob_tcp_if_include"}) {
      out.argv.push_back("--mca");
      out.argv.push_back(m);
      out.argv.push_back(c.network_interface);
    }
    out.argv.push_back("-x");
    out.argv.push_back("NCCL_SOCKET_IFNAME=" + c.network_interface);
  }
  for (const std::string& name : env.forwarded) {
    if (name == "NCCL_SOCKET_IFNAME" && !c.network_interface.empty()) continue;
    out.argv.push_back("-x");
    out.argv.push_back(name);
  }
  for (auto& w : shell_split(c.mpirun_args)) out.argv.push_back(w);
  out.argv.insert(out.argv.end(), c.command.begin(), c.command.end());
  return out;
}

std::string shell_join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += ' ';
    const bool plain = !w.empty() && std::all_of(w.begin(), w.end(), [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || std::strchr("-_./:=,@%+", ch) != nullptr;
    });
    if (plain) {
      out += w;
    } else {
      out += '\'';
      for (char ch : w) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      out += '\'';
    }
  }
  return out;
}

std::vector<std::string> shell_split(const std::string& text) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (char ch : text) {
    if (quote) {
      if (ch == quote)
        quote = 0;
      else
        cur += ch;
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
      in_word = true;
    } else if (std::isspace(static_cast<unsigned char>(ch))) {
      if (in_word) words.push_back(cur);
      cur.clear();
      in_word = false;
    } else {
      cur += ch;
      in_word = true;
    }
  }
  LS_CHECK_INPUT(!quote, "unbalanced quote in '{}'", text);
  if (in_word) words.push_back(cur);
  return words;
}

}  // namespace lockstep
