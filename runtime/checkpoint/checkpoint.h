// Training checkpoints: one safetensors file per checkpoint,
//   DIR/ckpt-<step, 9 digits>.safetensors
// holding "model.<parameter>" tensors, "optimizer.<state>" tensors (the flat
// buffers) and metadata: format version, model, optimizer and its step count,
// training progress (step, epoch, step within the epoch), global batch, seed,
// world size and the configuration as JSON. All randomness in lockstep is
// counter-based (shuffles from (seed, epoch), dropout from (seed, step, sample)),
// so the progress counters are the whole RNG state. Every tensor's CRC-32 and
// one of the metadata are stored too (checksums.h), and checked on load: a
// bit flipped anywhere in the file is found.
//
// Written by rank 0 only, into `dir` (created by the first write), atomically
// (temporary, fsync, rename, directory fsync): a crash leaves the previous
// checkpoint or the new one, never a torn file. Old checkpoints beyond `keep` are deleted after the new one is in place;
// temporaries left by a writer that was killed mid-write are deleted before
// the next write.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "checkpoint/safetensors.h"
#include "nn/model.h"
#include "optim/optimizer.h"

namespace lockstep {

struct TrainingProgress {
  int64_t step = 0;           // optimizer steps completed
  int64_t epoch = 0;          // epoch the next step belongs to
  int64_t step_in_epoch = 0;  // steps of that epoch already done
};

struct CheckpointInfo {
  TrainingProgress progress;
  int64_t global_batch = 0;
  uint64_t seed = 0;
  int world_size = 1;
  std::string config_json;
  // fp16 training's dynamic loss scale (0: none), its finite-step run and the
  // steps skipped so far (optim/step_rule.h); the optimizer's step count
  // is the applied updates.
  float loss_scale = 0.f;
  int64_t loss_scale_good_steps = 0;
  int64_t skipped_steps = 0;
  // Written as the optimizer's step count when >= 0 (fp16: the updates the
  // device applied, which the host's count of step() calls overstates).
  int64_t optimizer_steps = -1;
};

// Returns the path written. `opt_state`: the optimizer's state tensors in the
// whole flat layout (by default opt.state(); a sharded optimizer's come from
// DistributedOptimizer::gather_state()).
std::string save_checkpoint(const std::string& dir, const Model& model, Optimizer& opt, const CheckpointInfo& info,
                            int keep);
std::string save_checkpoint(const std::string& dir, const Model& model, Optimizer& opt, const CheckpointInfo& info,
                            int keep, const std::vector<std::pair<std::string, Tensor*>>& opt_state);

// A checkpoint ready to write: its tensors in host memory and its metadata.
// checkpoint_image() builds it at a step boundary; write_checkpoint() writes
// it (checksums, then the atomic write and the retention above), on any
// thread. save_checkpoint() is the two in a row.
struct CheckpointImage {
  int64_t step = 0;
  std::vector<Tensor> host;  // the bytes the entries point into
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, std::string> meta;
};

// Without `staging`, the host tensors are the model's and optimizer's own on
// the CPU (valid until they next change) and copies of GPU ones. With it,
// every tensor is copied into `staging` (allocated at the first call, reused
// while the shapes stay), so the image stays valid while training goes on.
CheckpointImage checkpoint_image(const Model& model, Optimizer& opt, const CheckpointInfo& info,
                                 const std::vector<std::pair<std::string, Tensor*>>& opt_state,
                                 std::vector<Tensor>* staging);
// Returns the path written. Throws InputError (naming the directory or file)
// when it cannot be written; the checkpoints already there stay as they were.
std::string write_checkpoint(const std::string& dir, CheckpointImage& image, int keep);

struct LoadedCheckpoint {
  std::string path;
  CheckpointInfo info;
};

// Loads the newest checkpoint in `dir` that is complete and matches the model
// and optimizer into them. A damaged or mismatched newer file is skipped and
// the next older one tried; the skipped ones are reported through `warn` once
// an older one loads. Returns nothing when the directory has no checkpoint (a
// fresh start). Throws InputError (one line, naming the newest file's problem,
// nothing passed to `warn`) when checkpoints exist but none can be used,
// leaving model and optimizer untouched.
std::optional<LoadedCheckpoint> load_latest_checkpoint(const std::string& dir, Model& model, Optimizer& opt,
                                                       const std::function<void(const std::string&)>& warn);

// Checkpoint files in `dir`, newest first.
std::vector<std::string> list_checkpoints(const std::string& dir);

}  // namespace lockstep
