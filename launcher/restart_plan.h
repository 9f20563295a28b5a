// The restart supervisor's decisions (restart.h), kept apart from processes
// and hosts so they can be tested:
//   - which exit codes are worth another attempt;
//   - the next attempt's world size and batch split: the largest number of
//     ranks that fits the slots left, is at least --min-np and no more than
//     the job started with, and keeps the global batch (and so the training:
//     the same samples per step, the same schedule) with a micro-batch no
//     larger than the first attempt's, accumulating where ranks are fewer;
//   - the trainer command for it (--global-batch-size, --accumulate-steps,
//     --resume);
//   - the words for an exit code, for the attempt lines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep {

// Not retried: success (0), bad input or setup (2: a restart meets the same
// flags, files and disks), a clean stop on SIGTERM/SIGUSR1 (75: the job was
// asked to end), and a command that cannot be started (126, 127).
bool retryable(int exit_code);

// "killed by signal 9 (SIGKILL)", "collective timeout (watchdog)", ...
std::string exit_meaning(int exit_code);

struct WorldChoice {
  int np = 0;               // 0: none fits (why says why)
  int accumulate = 1;       // micro-batches per step on each rank
  int64_t micro_batch = 0;  // samples per micro-batch
  std::string why;          // when np is 0
};

// The next attempt's ranks for `slots` slots left. max_micro_batch: the first
// attempt's micro-batch (what fit its memory).
WorldChoice choose_world(int64_t global_batch, int64_t max_micro_batch, int slots, int max_np, int min_np);

// The trainer command with its batch flags replaced by --global-batch-size G
// --accumulate-steps K, and --resume added (each once, at the end).
std::vector<std::string> restart_command(const std::vector<std::string>& command, int64_t global_batch,
                                         int accumulate);

// Whether the command (or LOCKSTEP_CHECKPOINT_DIR, `env_dir`) names a
// checkpoint directory: a restart resumes from its newest checkpoint.
bool names_checkpoint_dir(const std::vector<std::string>& command, bool env_dir);

}  // namespace lockstep
