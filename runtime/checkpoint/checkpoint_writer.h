// CheckpointWriter: rank 0's checkpoint writes, in the background or inline.
//   save()  waits for the previous write, copies the state into the writer's
//           staging tensors (allocated once, reused), then writes it on the
//           writer's thread while training goes on (background) or before
//           returning (sync, no copy).
//   wait()  waits for the write in flight.
//   take()  the outcomes of finished writes not yet taken, oldest first.
// A write that fails (disk full, permissions, a directory that cannot be
// created) never throws here: its outcome carries the one-line error, and
// the checkpoints already on disk stay as they were (the write is atomic).
// The destructor waits for the write in flight.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace lockstep {

struct CheckpointOutcome {
  int64_t step = 0;
  std::string path;   // written
  std::string error;    // empty when written; an InputError's message (no source location)
  std::string subject;  // the InputError's subject (core/input_subject.h), which `error` begins with
  double seconds = 0;       // the write itself: checksums, file, fsync, rename
  double copy_seconds = 0;  // background: the state's copy into the staging tensors, in save()
  bool ok() const { return error.empty(); }
};

class CheckpointWriter {
 public:
  explicit CheckpointWriter(bool background);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  void save(const std::string& dir, const Model& model, Optimizer& opt, const CheckpointInfo& info, int keep,
            const std::vector<std::pair<std::string, Tensor*>>& opt_state);
  void wait();
  std::vector<CheckpointOutcome> take();
  bool background() const { return background_; }

 private:
  struct Job {
    std::string dir;
    int keep = 1;
    CheckpointImage image;
    double copy_seconds = 0;
  };
  static CheckpointOutcome write(Job& job);
  void run();

  const bool background_;
  std::vector<Tensor> staging_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Job> job_;  // queued or being written
  bool stopping_ = false;
  std::vector<CheckpointOutcome> done_;
  std::thread thread_;  // last: started after the members it uses
};

}  // namespace lockstep
