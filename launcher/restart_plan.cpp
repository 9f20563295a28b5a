// The restart supervisor's decisions (see restart_plan.h).
#include "restart_plan.h"

#include <signal.h>

#include <cstring>

#include <fmt/format.h>

namespace lockstep {

bool retryable(int exit_code) {
  return exit_code != 0 && exit_code != 2 && exit_code != 75 && exit_code != 126 && exit_code != 127;
}

std::string exit_meaning(int code) {
  switch (code) {
    case 1: return "an internal error";
    case 2: return "bad input or a failed setup check";
    case 3: return "a collective timeout (watchdog)";
    case 4: return "replicas diverged";
    case 75: return "stopped by a signal after a checkpoint";
    case 126:
    case 127: return "the command could not be started";
    default: break;
  }
  if (code > 128 && code < 128 + 65) {
    const char* name = sigabbrev_np(code - 128);
    return fmt::format("killed by signal {}{}", code - 128, name ? fmt::format(" (SIG{})", name) : std::string());
  }
  return fmt::format("exit code {}", code);
}

WorldChoice choose_world(int64_t global_batch, int64_t max_micro_batch, int slots, int max_np, int min_np) {
  WorldChoice w;
  const int top = std::min(slots, max_np);
  for (int np = top; np >= std::max(1, min_np); --np) {
    if (global_batch % np != 0) continue;
    const int64_t per_rank = global_batch / np;
    for (int64_t k = 1; k <= per_rank; ++k) {
      if (per_rank % k != 0 || per_rank / k > max_micro_batch) continue;
      w.np = np;
      w.accumulate = static_cast<int>(k);
      w.micro_batch = per_rank / k;
      return w;
    }
  }
  if (top < std::max(1, min_np))
    w.why = fmt::format("{} slot{} left, fewer than --min-np {}", slots, slots == 1 ? "" : "s", min_np);
  else
    w.why = fmt::format("no world size from {} down to {} splits the global batch of {} evenly", top,
                        std::max(1, min_np), global_batch);
  return w;
}

namespace {

// Whether `arg` is `flag` or `flag=...`.
bool is_flag(const std::string& arg, const char* flag) {
  const size_t n = std::strlen(flag);
  return arg.compare(0, n, flag) == 0 && (arg.size() == n || arg[n] == '=');
}

}  // namespace

std::vector<std::string> restart_command(const std::vector<std::string>& command, int64_t global_batch,
                                         int accumulate) {
  std::vector<std::string> out;
  for (size_t i = 0; i < command.size(); ++i) {
    const std::string& a = command[i];
    if (i > 0 && (is_flag(a, "--global-batch-size") || is_flag(a, "--accumulate-steps"))) {
      if (a.find('=') == std::string::npos) ++i;  // its value is the next word
      continue;
    }
    if (i > 0 && is_flag(a, "--resume")) continue;
    out.push_back(a);
  }
  for (const std::string& a : {std::string("--global-batch-size"), std::to_string(global_batch),
                               std::string("--accumulate-steps"), std::to_string(accumulate),
                               std::string("--resume")})
    out.push_back(a);
  return out;
}

bool names_checkpoint_dir(const std::vector<std::string>& command, bool env_dir) {
  for (size_t i = 1; i < command.size(); ++i)
    if (is_flag(command[i], "--checkpoint-dir")) return true;
  return env_dir;
}

}  // namespace lockstep
