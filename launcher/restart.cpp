// The restart supervisor (see restart.h).
#include "restart.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "host_check.h"
#include "job_control.h"
#include "restart_plan.h"
#include "supervise.h"

namespace lockstep {
namespace {

constexpr double kProbeSeconds = 3;
constexpr double kGoneSeconds = 10;     // to see the failed attempt's processes gone
constexpr double kMaxBackoffSeconds = 30;

// This machine's processes (other than this one) whose environment holds `needle`.
std::vector<pid_t> local_processes_with(const std::string& needle) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == getpid()) continue;
    std::ifstream f(entry.path() / "environ", std::ios::binary);
    std::stringstream text;
    text << f.rdbuf();
    if (text.str().find(needle) != std::string::npos) out.push_back(pid);
  }
  return out;
}

// Ends this machine's processes of the job; returns how many would not go.
size_t end_local_processes(const std::string& needle) {
  const auto end = SteadyClock::now() + std::chrono::milliseconds(static_cast<int64_t>(kGoneSeconds * 1000));
  for (;;) {
    const std::vector<pid_t> left = local_processes_with(needle);
    if (left.empty() || SteadyClock::now() >= end) return left.size();
    for (pid_t p : left) kill(p, SIGKILL);
    usleep(100 * 1000);
  }
}

// The shell a remote host runs: end the job's processes there (confirmed
// gone, or a "leftover:" line and exit 3), then report the trainer's build.
std::string remote_check(const std::string& needle, const std::string& trainer) {
  return fmt::format(
      "t={}; i=0; while :; do p=; for f in /proc/[0-9]*/environ; do grep -qsaF \"$t\" \"$f\" && "
      "{{ q=${{f#/proc/}}; p=\"$p ${{q%/environ}}\"; }}; done; [ -z \"$p\" ] && break; i=$((i+1)); "
      "[ $i -gt {} ] && {{ echo \"leftover:$p\"; exit 3; }}; kill -9 $p 2>/dev/null; sleep 0.2; done; exec {} --version",
      shell_join({needle}), static_cast<int>(kGoneSeconds / 0.2), shell_join({trainer}));
}

struct Recheck {
  std::vector<Host> kept;
  std::vector<std::pair<std::string, std::string>> left_out;  // host, why
};

// The failed attempt's processes ended, the hosts checked again.
Recheck recheck_hosts(const LaunchConfig& c, const std::vector<Host>& hosts, const std::string& needle,
                      const std::string& local_build) {
  Recheck out;
  const size_t stuck = end_local_processes(needle);
  if (stuck > 0)
    std::cerr << "lockstep-run: warning: " << stuck << " processes of the failed attempt on this machine did not end "
              << kGoneSeconds << " s after SIGKILL" << std::endl;
  if (hosts.empty()) return out;
  const std::vector<HostStatus> status = probe_hosts(hosts, c.ssh_port, kProbeSeconds);
  std::vector<std::future<std::string>> problems;
  for (size_t i = 0; i < hosts.size(); ++i) {
    problems.push_back(std::async(std::launch::async, [&, i]() -> std::string {
      if (!status[i].problem.empty()) return status[i].problem;
      if (status[i].local) return stuck > 0 ? "processes of the failed attempt would not end" : "";
      // Without the token in its own environment, so the check never finds itself.
      std::vector<std::string> argv{"env", "-u", kRunControlVariable, "ssh"};
      for (auto& o : ssh_options(c)) argv.push_back(o);
      argv.push_back(hosts[i].name);
      argv.push_back(remote_check(needle, c.command.front()));
      const CommandResult r = run_command(argv, kGoneSeconds + 20);
      if (r.timed_out) return "the check over ssh did not finish";
      if (r.exit_code == 255) return "ssh failed";
      if (r.exit_code == 3) return "processes of the failed attempt would not end";
      const size_t at = r.output.find("lockstep ");
      if (r.exit_code != 0 || at == std::string::npos) return fmt::format("trainer --version failed (exit {})", r.exit_code);
      const std::string build = r.output.substr(at + 9, r.output.find('\n', at) - at - 9);
      return build == local_build ? "" : "a different trainer build (" + build + ")";
    }));
  }
  for (size_t i = 0; i < hosts.size(); ++i) {
    const std::string why = problems[i].get();
    if (why.empty())
      out.kept.push_back(hosts[i]);
    else
      out.left_out.emplace_back(hosts[i].name, why);
  }
  return out;
}

// The ranks mpirun placed on hosts[h] (--map-by slot: the slots in order).
std::vector<int> ranks_on(const std::vector<Host>& hosts, int np, size_t h) {
  std::vector<int> out;
  int first = 0;
  for (size_t i = 0; i < h; ++i) first += hosts[i].slots;
  for (int r = first; r < std::min(np, first + hosts[h].slots); ++r) out.push_back(r);
  return out;
}

struct Attempt {
  int number = 0, np = 0, exit_code = 0;
  int64_t last_step = -1;
  std::string cause;
};

std::string history(const std::vector<Attempt>& attempts) {
  std::string s;
  for (const Attempt& a : attempts)
    s += fmt::format("{}attempt {}: {} ranks, {}{}{}", s.empty() ? "" : "; ", a.number, a.np, exit_meaning(a.exit_code),
                     a.last_step >= 0 ? fmt::format(", reached step {}", a.last_step) : std::string(),
                     a.cause.empty() ? std::string() : " (" + a.cause + ")");
  return s;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string local_build_of(const std::string& trainer) {
  const CommandResult r = run_command({trainer, "--version"}, 30);
  const size_t at = r.output.find("lockstep ");
  return at == std::string::npos ? "" : r.output.substr(at + 9, r.output.find('\n', at) - at - 9);
}

}  // namespace

int run_job(LaunchConfig c, const RestartOptions& restart, double abort_grace_s, bool verbose) {
  // The abort and report channel: passed to the ranks as LOCKSTEP_RUN_CONTROL,
  // forwarded like every LOCKSTEP_* variable (srun passes the environment).
  std::unique_ptr<AbortListener> listener;
  try {
    listener = std::make_unique<AbortListener>(c.network_interface);
    setenv(kRunControlVariable, format_control(listener->endpoint()).c_str(), 1);
  } catch (const Error& e) {
    std::cerr << "lockstep-run: warning: no abort channel (" << e.what()
              << "); a job with an unreachable host may not end by itself" << std::endl;
  }
  const std::string needle =
      listener ? std::string(kRunControlVariable) + "=" + listener->endpoint().token + "@" : std::string();
  const std::vector<std::string> command = c.command;
  const int first_np = c.np > 0 ? c.np : (c.hosts.empty() ? 0 : total_slots(c.hosts));
  const std::string local_build = restart.max_restarts > 0 && !c.hosts.empty() ? local_build_of(command.front()) : "";
  std::vector<Attempt> attempts;
  int64_t global_batch = 0, max_micro = 0;
  int restarts = 0;
  SteadyClock::time_point last_failure;  // when the previous attempt's failure was seen
  unsetenv(kRunAttemptVariable);
  for (int number = 1;; ++number) {
    const LaunchCommand cmd = build_launch(c, capture_environment());
    for (const auto& [k, v] : cmd.env) setenv(k.c_str(), v.c_str(), 1);
    if (verbose) std::cerr << "lockstep-run: " << shell_join(cmd.argv) << std::endl;
    const int64_t resumed_after = attempts.empty() ? -1 : attempts.back().last_step;
    const AttemptOutcome o = supervise(cmd.argv, listener.get(), abort_grace_s, [&](const AttemptOutcome& now) {
      if (number == 1 || !now.start) return;
      std::cerr << fmt::format(
                       "lockstep-run: attempt {} trains again from step {} ({} steps recomputed), {:.1f} s after "
                       "the failure was seen",
                       number, now.start->step, std::max<int64_t>(0, resumed_after - now.start->step),
                       std::chrono::duration<double>(*now.first_step_at - last_failure).count())
                << std::endl;
    });
    last_failure = o.failed_at;
    const double failed_unix =
        unix_now() - std::chrono::duration<double>(SteadyClock::now() - o.failed_at).count();
    if (o.start) {
      global_batch = o.start->global_batch;
      if (max_micro == 0) max_micro = o.start->micro_batch;
    }
    Attempt a{number, o.start ? o.start->world : (c.np > 0 ? c.np : first_np), o.exit_code, o.last_step,
              o.abort ? o.abort->cause : std::string()};
    attempts.push_back(a);
    if (o.exit_code == 0) {
      if (number > 1) std::cerr << "lockstep-run: the job finished on attempt " << number << std::endl;
      return 0;
    }
    if (restart.max_restarts == 0) return o.exit_code;
    if (o.signal) {
      std::cerr << "lockstep-run: not restarting: lockstep-run was sent " << sigabbrev_np(o.signal) << "; "
                << history(attempts) << std::endl;
      return o.exit_code;
    }
    if (!retryable(o.exit_code)) {
      std::cerr << "lockstep-run: not restarting: " << exit_meaning(o.exit_code) << " is not retried; "
                << history(attempts) << std::endl;
      return o.exit_code;
    }
    if (restarts == restart.max_restarts) {
      std::cerr << "lockstep-run: error: the job failed with exit code " << o.exit_code << " and its restart budget "
                << "is spent (--max-restarts " << restart.max_restarts << "): " << history(attempts) << std::endl;
      return o.exit_code;
    }
    // The failed attempt's processes gone, the hosts checked again.
    const Recheck hosts = recheck_hosts(c, c.hosts, needle, local_build);
    std::vector<std::string> lost_hosts;
    std::vector<int> lost_ranks;
    for (const auto& [name, why] : hosts.left_out) {
      lost_hosts.push_back(name + " (" + why + ")");
      for (size_t h = 0; h < c.hosts.size(); ++h)
        if (c.hosts[h].name == name)
          for (int r : ranks_on(c.hosts, c.np > 0 ? c.np : total_slots(c.hosts), h)) lost_ranks.push_back(r);
    }
    const int slots = c.hosts.empty() ? first_np : total_slots(hosts.kept);
    WorldChoice w;
    if (global_batch > 0) {
      w = choose_world(global_batch, max_micro, slots, first_np, restart.min_np);
    } else if (slots >= a.np && a.np >= restart.min_np) {
      w.np = a.np;  // the batch never reported: the same world size, the same flags
    } else {
      w.why = fmt::format("{} slots left and the failed attempt never reported its global batch", slots);
    }
    std::string left_text;
    for (const std::string& h : lost_hosts) left_text += fmt::format("{}{}", left_text.empty() ? "" : ", ", h);
    if (w.np == 0) {
      std::cerr << "lockstep-run: error: not restarting: " << w.why
                << (left_text.empty() ? "" : " (left out: " + left_text + ")") << "; " << history(attempts)
                << std::endl;
      return o.exit_code;
    }
    ++restarts;
    const double backoff =
        std::min(kMaxBackoffSeconds, restart.backoff_s * static_cast<double>(1 << std::min(restarts - 1, 10)));
    std::string ranks_text;
    for (int r : lost_ranks) ranks_text += fmt::format("{}{}", ranks_text.empty() ? "" : ",", r);
    std::cerr << fmt::format(
                     "lockstep-run: attempt {} failed: {}{}{}; {}restart {} of {} in {:g} s at {} ranks{}{}",
                     number, exit_meaning(o.exit_code), a.cause.empty() ? "" : " (" + a.cause + ")",
                     o.last_step >= 0 ? fmt::format(", reached step {}", o.last_step) : std::string(),
                     left_text.empty() ? "" : "left out " + left_text + " (ranks " + ranks_text + "); ", restarts,
                     restart.max_restarts, backoff, w.np,
                     c.hosts.empty() ? std::string() : " on " + format_host_list(hosts.kept),
                     global_batch > 0 ? fmt::format(", global batch {} = {} x {} x {} accumulation steps", global_batch,
                                                    w.np, w.micro_batch, w.accumulate)
                                      : std::string())
              << std::endl;
    if (const int sig = wait_for_signal(backoff)) {
      std::cerr << "lockstep-run: not restarting: lockstep-run was sent " << sigabbrev_np(sig) << "; "
                << history(attempts) << std::endl;
      return o.exit_code;
    }
    nlohmann::json record = {{"attempt", number + 1},    {"previous_world", a.np},  {"exit_code", o.exit_code},
                             {"cause", exit_meaning(o.exit_code) + (a.cause.empty() ? "" : ": " + a.cause)},
                             {"lost_hosts", lost_hosts}, {"lost_ranks", lost_ranks}, {"failed_unix", failed_unix},
                             {"backoff_seconds", backoff}};
    if (o.last_step >= 0) record["last_step"] = o.last_step;
    setenv(kRunAttemptVariable, record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str(), 1);
    if (!c.hosts.empty()) {
      c.hosts = hosts.kept;
      c.hostfile.clear();  // the hosts that remain, as -H
    }
    c.np = w.np;
    if (global_batch > 0) {
      c.command = restart_command(command, global_batch, w.accumulate);
    } else {
      c.command = command;
      if (std::find(command.begin() + 1, command.end(), "--resume") == command.end()) c.command.push_back("--resume");
    }
  }
}

}  // namespace lockstep
