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

void on_signal(int sig, siginfo_t* info, void*) {
  // Terminal-generated signals (si_code SI_KERNEL) already went to mpirun,
  // which shares the foreground process group; pass on only sent ones.
  if (info && info->si_code == SI_KERNEL) return;
  for (size_t i = 0; i < kForwarded.size(); ++i)
    if (kForwarded[i] == sig) g_pending[i] = true;
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

int supervise(const std::vector<std::string>& argv, AbortListener* listener, double abort_grace_s) {
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : kForwarded) sigaction(sig, &sa, nullptr);

  const pid_t child = fork();
  if (child < 0) {
    std::cerr << "lockstep-run: error: cannot start " << argv[0] << ": " << std::strerror(errno) << std::endl;
    return 127;
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

  using Clock = std::chrono::steady_clock;
  std::optional<int> reported;  // exit code a rank reported through the abort channel
  Clock::time_point deadline;
  for (;;) {
    for (size_t i = 0; i < kForwarded.size(); ++i)
      if (g_pending[i].exchange(false)) kill(child, kForwarded[i]);
    int status = 0;
    const pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) return exit_code(status);
    if (done < 0 && errno != EINTR) return 1;
    const std::optional<int> notice = listener ? listener->poll(100) : std::nullopt;
    if (!listener) usleep(100 * 1000);
    if (notice && !reported) {
      reported = notice;
      deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(abort_grace_s * 1000));
    }
    if (reported && Clock::now() >= deadline) {
      const std::vector<pid_t> below = descendants(child);
      kill(child, SIGKILL);
      for (pid_t p : below) kill(p, SIGKILL);
      waitpid(child, &status, 0);
      std::cerr << "lockstep-run: error: a rank ended the job (exit code " << *reported << ") and mpirun was still "
                << "running " << abort_grace_s << " s later (a host unreachable?); ended mpirun and its "
                << below.size() << " child processes" << std::endl;
      return *reported;
    }
  }
}

}  // namespace lockstep
