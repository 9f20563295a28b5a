// The channel from a job's ranks back to the lockstep-run that started them.
//
// Why: when a host's link is cut, Open MPI's mpirun waits for that host's
// daemon forever, even after the reachable ranks have called MPI_Abort. So a
// rank that is about to end the job (watchdog timeout, runtime error) first
// tells lockstep-run, which then gives mpirun a grace period to exit and ends
// it (and its ssh children) when it does not.
//
// lockstep-run listens on a TCP port (all interfaces) and passes the ranks
//   LOCKSTEP_RUN_CONTROL=<token>@<port>@<address>,<address>,...
// (forwarded with -x like every LOCKSTEP_* variable). A rank connects to the
// addresses in order and sends "abort <token> <exit code>\n"; lockstep-run
// answers "ok\n". The token (random per job) keeps stray connections from
// ending a job; the answer tells the rank it reached lockstep-run and not some
// middlebox that accepts every connection. Everything is best effort with a
// deadline: a rank never waits more than ~2 s on this before MPI_Abort.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace lockstep {

constexpr const char* kRunControlVariable = "LOCKSTEP_RUN_CONTROL";

struct ControlEndpoint {
  std::string token;
  int port = 0;
  std::vector<std::string> addresses;  // IPv4, in the order ranks try them
};

std::string format_control(const ControlEndpoint& e);
// Nothing for a malformed value (ranks then skip the notification).
std::optional<ControlEndpoint> parse_control(const std::string& text);

// lockstep-run's side. The addresses are those of `interface` when given,
// else every up, non-loopback IPv4 interface's, then 127.0.0.1.
class AbortListener {
 public:
  explicit AbortListener(const std::string& interface);
  ~AbortListener();
  AbortListener(const AbortListener&) = delete;
  AbortListener& operator=(const AbortListener&) = delete;

  const ControlEndpoint& endpoint() const { return endpoint_; }
  // Waits up to timeout_ms for a connection; returns the exit code of a valid
  // abort notice (answered "ok"), nothing otherwise.
  std::optional<int> poll(int timeout_ms);

 private:
  int fd_ = -1;
  ControlEndpoint endpoint_;
};

// A rank's side: tells lockstep-run (if LOCKSTEP_RUN_CONTROL is set) that this
// rank is ending the job with `code`. Returns whether lockstep-run answered.
// Never throws; returns within about budget_s.
bool notify_launcher_of_abort(int code, double budget_s = 2.0);

}  // namespace lockstep
