// lockstep-run's look at the hosts before it launches anything:
//   - every host name resolves (getaddrinfo),
//   - hosts other than this one answer on the ssh port within a few seconds
//     (a TCP connect, all hosts at once), so an unreachable host is an error
//     in seconds instead of an mpirun that hangs in ssh,
//   - for --check: each host runs the trainer over ssh (`TRAINER --version`)
//     and reports the same build as this host.
// Everything here runs in parallel across hosts and has a deadline.
#pragma once

#include <string>
#include <vector>

#include "hosts.h"
#include "launch.h"

namespace lockstep {

struct HostStatus {
  std::string name;
  std::string address;  // first resolved address; empty when it does not resolve
  bool local = false;   // one of this machine's own addresses (or its host name)
  std::string problem;  // empty when fine
};

// Resolves each host and probes the ssh port of the non-local ones
// (timeout_s per host, all hosts concurrently). Returns one status per host.
std::vector<HostStatus> probe_hosts(const std::vector<Host>& hosts, int ssh_port, double timeout_s);

// Throws InputError naming the first host with a problem (and how many more).
void require_reachable(const std::vector<Host>& hosts, const std::vector<HostStatus>& status);

// A command's output and exit status, with a deadline (killed when it passes).
struct CommandResult {
  int exit_code = -1;  // -1: did not start or was killed
  bool timed_out = false;
  std::string output;  // stdout and stderr together
};
CommandResult run_command(const std::vector<std::string>& argv, double timeout_s);

// --check: runs `trainer --version` on every host (locally for this host,
// over ssh for the others) and prints a table. Returns true when every host
// is reachable and reports this host's build.
bool check_hosts(const LaunchConfig& config, const std::vector<Host>& hosts, const std::string& trainer);

}  // namespace lockstep
