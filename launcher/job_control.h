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
// addresses in order and sends "abort <token> <exit code> <cause>\n" (the
// cause: its one-line error, may be empty); lockstep-run answers "ok\n". The
// token (random per job) keeps stray connections from ending a job; the
// answer tells the rank it reached lockstep-run and not some middlebox that
// accepts every connection. Everything is best effort with a deadline: a rank
// never waits more than ~2 s on this before MPI_Abort.
//
// Rank 0 also keeps one connection open for progress ("report <token>\n",
// answered "ok\n"), then sends, never waiting (a line that does not fit the
// socket's buffer is dropped):
//   "start <step> <world> <global batch> <micro-batch> <accumulate steps>\n"
//       before its first step (step: where training starts, 0 or the
//       checkpoint's);
//   "step <steps done>\n" after every step.
// The restart supervisor (restart.h) learns from these how far a failed
// attempt got and when the next one trains again.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lockstep {

constexpr const char* kRunControlVariable = "LOCKSTEP_RUN_CONTROL";
// Set by lockstep-run for an attempt after a restart: a JSON object
// describing the failure it recovers from (restart.h), which rank 0 writes to
// the metrics file as a "restart" record after its first step.
constexpr const char* kRunAttemptVariable = "LOCKSTEP_RUN_ATTEMPT";

struct ControlEndpoint {
  std::string token;
  int port = 0;
  std::vector<std::string> addresses;  // IPv4, in the order ranks try them
};

std::string format_control(const ControlEndpoint& e);
// Nothing for a malformed value (ranks then skip the notification).
std::optional<ControlEndpoint> parse_control(const std::string& text);

// What lockstep-run hears from a job.
struct ControlEvent {
  enum class Kind { Abort, Start, Step };
  Kind kind = Kind::Abort;
  int code = 0;        // Abort: the exit code the rank ends the job with
  std::string cause;   // Abort: the rank's one-line reason (may be empty)
  int64_t step = 0;    // Start: the step training starts from; Step: steps done
  int world = 0;       // Start: ranks
  int64_t global_batch = 0, micro_batch = 0;
  int accumulate = 0;  // Start: micro-batches per step
};

// lockstep-run's side. The addresses are those of `interface` when given,
// else every up, non-loopback IPv4 interface's, then 127.0.0.1.
class AbortListener {
 public:
  explicit AbortListener(const std::string& interface);
  ~AbortListener();
  AbortListener(const AbortListener&) = delete;
  AbortListener& operator=(const AbortListener&) = delete;

  const ControlEndpoint& endpoint() const { return endpoint_; }
  // Waits up to timeout_ms for a connection or report line; returns the
  // events that arrived: valid abort notices (answered "ok") and the lines of
  // open report connections. Malformed or foreign input is dropped.
  std::vector<ControlEvent> poll(int timeout_ms);
  // Closes the report connections (between attempts).
  void drop_reports();

 private:
  void accept_one(std::vector<ControlEvent>& out);
  void read_reports(std::vector<ControlEvent>& out);
  int fd_ = -1;
  ControlEndpoint endpoint_;
  struct Report {
    int fd;
    std::string pending;  // bytes after the last complete line
  };
  std::vector<Report> reports_;
};

// A rank's side: tells lockstep-run (if LOCKSTEP_RUN_CONTROL is set) that this
// rank is ending the job with `code`, because of `cause` (its first line is
// sent, at most 300 bytes). Returns whether lockstep-run answered. Never
// throws; returns within about budget_s.
bool notify_launcher_of_abort(int code, const std::string& cause = "", double budget_s = 2.0);

// Rank 0's progress reports to lockstep-run. Never throws, never blocks a step.
class LauncherReports {
 public:
  // Connected when LOCKSTEP_RUN_CONTROL is set and lockstep-run answers within
  // budget_s; nothing otherwise.
  static std::unique_ptr<LauncherReports> connect(double budget_s = 2.0);
  ~LauncherReports();
  LauncherReports(const LauncherReports&) = delete;
  LauncherReports& operator=(const LauncherReports&) = delete;

  void started(int64_t step, int world, int64_t global_batch, int64_t micro_batch, int accumulate);
  void stepped(int64_t steps_done);

 private:
  explicit LauncherReports(int fd) : fd_(fd) {}
  void send_line(const std::string& line);
  int fd_ = -1;
};

}  // namespace lockstep
