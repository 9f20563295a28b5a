// mpirun under lockstep-run's watch (see supervise.h).
#include "supervise.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

namespace lockstep {

namespace {

constexpr std::array<int, 5> kForwarded = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};
// Signals received and not yet passed on, one flag per entry of kForwarded.
// A handler can touch nothing else; the loop below does the forwarding.
std::array<std::atomic<bool>, kForwarded.size()> g_pending{};
// Terminal-generated signals (si_code SI_KERNEL) already went to mpirun,
// which shares the foreground process group: noted, never passed on.
std::array<std::atomic<bool>, kForwarded.size()> g_terminal{};

void on_signal(int sig, siginfo_t* info, void*) {
  const bool terminal = info && info->si_code == SI_KERNEL;
  for (size_t i = 0; i < kForwarded.size(); ++i)
    if (kForwarded[i] == sig) (terminal ? g_terminal : g_pending)[i] = true;
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Every process below `root` (children, grandchildren, ...), from /proc.
std::vector<pid_t> descendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;  // parent -> child
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const size_t close = line.rfind(')');  // the command name may hold spaces
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state;
    pid_t ppid;
    if (rest >> state >> ppid) children.emplace(ppid, static_cast<pid_t>(std::stol(name)));
  }
  std::vector<pid_t> out;
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    for (auto [it, end] = children.equal_range(p); it != end; ++it) {
      out.push_back(it->second);
      todo.push_back(it->second);
    }
  }
  return out;
}

}  // namespace

namespace {

void install_handlers() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : kForwarded) sigaction(sig, &sa, nullptr);
}

void take_event(const ControlEvent& e, AttemptOutcome& out, double abort_grace_s,
                std::optional<SteadyClock::time_point>& deadline) {
  switch (e.kind) {
    case ControlEvent::Kind::Abort:
      if (!out.abort) {
        out.abort = e;
        out.failed_at = SteadyClock::now();
        deadline = out.failed_at + std::chrono::milliseconds(static_cast<int64_t>(abort_grace_s * 1000));
      }
      break;
    case ControlEvent::Kind::Start:
      out.start = e;
      break;
    case ControlEvent::Kind::Step:
      out.last_step = e.step;
      if (!out.first_step_at) out.first_step_at = SteadyClock::now();
      break;
  }
}

}  // namespace

AttemptOutcome supervise(const std::vector<std::string>& argv, AbortListener* listener, double abort_grace_s,
                         const std::function<void(const AttemptOutcome&)>& on_first_step) {
  install_handlers();
  AttemptOutcome out;
  out.began = SteadyClock::now();
  if (listener) listener->drop_reports();  // a previous attempt's
  const pid_t child = fork();
  if (child < 0) {
    std::cerr << "lockstep-run: error: cannot start " << argv[0] << ": " << std::strerror(errno) << std::endl;
    out.exit_code = 127;
    out.failed_at = SteadyClock::now();
    return out;
  }
  if (child == 0) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : kForwarded) sigaction(sig, &dfl, nullptr);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::cerr << "lockstep-run: error: cannot run " << argv[0] << ": " << std::strerror(errno) << std::endl;
    _exit(127);
  }

  std::optional<SteadyClock::time_point> deadline;  // set by the first abort notice
  bool told_first_step = false;
  for (;;) {
    for (size_t i = 0; i < kForwarded.size(); ++i)
      if (g_pending[i].exchange(false)) {
        kill(child, kForwarded[i]);
        out.signal = kForwarded[i];
      }
    for (size_t i = 0; i < kForwarded.size(); ++i)
      if (g_terminal[i].exchange(false)) out.signal = kForwarded[i];
    int status = 0;
    const pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child || (done < 0 && errno != EINTR)) {
      // The last reports may still be in the socket: read what is there.
      if (listener)
        for (const ControlEvent& e : listener->poll(0)) take_event(e, out, abort_grace_s, deadline);
      out.exit_code = done == child ? exit_code(status) : 1;
      if (!out.abort) out.failed_at = SteadyClock::now();
      return out;
    }
    if (listener) {
      for (const ControlEvent& e : listener->poll(100)) take_event(e, out, abort_grace_s, deadline);
    } else {
      usleep(100 * 1000);
    }
    if (out.first_step_at && !told_first_step) {
      told_first_step = true;
      if (on_first_step) on_first_step(out);
    }
    if (deadline && SteadyClock::now() >= *deadline) {
      const std::vector<pid_t> below = descendants(child);
      kill(child, SIGKILL);
      for (pid_t p : below) kill(p, SIGKILL);
      waitpid(child, &status, 0);
      std::cerr << "lockstep-run: error: a rank ended the job (exit code " << out.abort->code << ") and "
                << argv[0] << " was still running " << abort_grace_s << " s later (a host unreachable?); ended "
                << argv[0] << " and its " << below.size() << " child processes" << std::endl;
      out.exit_code = out.abort->code;
      out.ended_by_launcher = true;
      return out;
    }
  }
}

int wait_for_signal(double seconds) {
  install_handlers();
  const auto end = SteadyClock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  for (;;) {
    for (size_t i = 0; i < kForwarded.size(); ++i)
      if (g_pending[i].exchange(false) || g_terminal[i].exchange(false)) return kForwarded[i];
    if (SteadyClock::now() >= end) return 0;
    usleep(50 * 1000);
  }
}

}  // namespace lockstep
