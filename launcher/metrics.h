// What a run records beside its log (rank 0), each output optional:
//   MetricsWriter  the metrics file: JSON Lines, one object per line, flushed
//                  as written so a running job can be followed.
//   RunRecords     the metrics file and TensorBoard event files together: one
//                  record per epoch goes to both; per step, TensorBoard gets
//                  rank 0's running loss, the learning rate and (clipping)
//                  the gradient norm.
//   peak_resident_bytes  the process's memory high-water mark, for the summary.
// Opened only after every input was validated.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "nn/loss.h"
#include "profiling/tfevents.h"

namespace lockstep {

// This process's peak resident set size so far (getrusage), in bytes; 0 where
// the system does not say.
int64_t peak_resident_bytes();

class MetricsWriter {
 public:
  // `append`: a resumed run continues the file (a restarted job's attempts
  // share one file); otherwise it starts empty.
  MetricsWriter(const std::string& path, bool append);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(const nlohmann::json& record);

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
};

class RunRecords {
 public:
  // Empty names turn an output off (both off on every rank but 0).
  RunRecords(const std::string& metrics_file, const std::string& tensorboard_dir, bool append);

  // Metrics file only ("stopped", "summary").
  void write(const nlohmann::json& record) {
    if (metrics_) metrics_->write(record);
  }
  // An "epoch" record: to the metrics file, and its train_* (and, with `eval`,
  // test_*), images_per_sec and seconds values to TensorBoard as epoch/* at its step.
  void epoch(const nlohmann::json& record, bool eval);
  // A "loss_scale" record (fp16): to the metrics file, and to TensorBoard as train/*.
  void loss_scale(const nlohmann::json& record);
  // A "grad_clip" record (--clip-grad-norm): to the metrics file, and its
  // clipped_steps to TensorBoard as train/clipped_steps.
  void grad_clip(const nlohmann::json& record);
  // A "restart" record (an attempt lockstep-run restarted): to the metrics
  // file, and its attempt, world, steps_lost and recover_seconds to
  // TensorBoard as restart/*.
  void restart(const nlohmann::json& record);

  // Per step (TensorBoard only): true when step() writes anything.
  bool wants_steps() const { return events_ != nullptr; }
  void begin_epoch() { seen_ = LossStats{}; }
  // `so_far`: rank 0's loss sums since begin_epoch(); writes train/loss_rank0
  // (the mean since the last step() that had new samples), train/lr and, when
  // `grad_norm` is given (clipping), train/grad_norm: the last update's
  // gradient norm before clipping.
  void step(int64_t step, const LossStats& so_far, double lr, std::optional<double> grad_norm = std::nullopt);

 private:
  std::unique_ptr<MetricsWriter> metrics_;
  std::unique_ptr<EventFileWriter> events_;
  LossStats seen_;
};

}  // namespace lockstep
