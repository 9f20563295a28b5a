// MetricsWriter and RunRecords.
#include "metrics.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "core/error.h"

namespace lockstep {

MetricsWriter::MetricsWriter(const std::string& path, bool append) : path_(path) {
  f_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!f_) LS_INPUT_ERROR("--metrics-file: cannot open {} ({})", path, std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  if (f_) std::fclose(f_);
}

int64_t peak_resident_bytes() {
  struct rusage u {};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // Linux reports KiB
}

void MetricsWriter::write(const nlohmann::json& record) {
  // Paths are bytes, not necessarily UTF-8: replaced where JSON cannot hold them, never a throw.
  const std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
    LS_INPUT_ERROR("--metrics-file: write to {} failed ({})", path_, std::strerror(errno));
}

RunRecords::RunRecords(const std::string& metrics_file, const std::string& tensorboard_dir, bool append) {
  if (!metrics_file.empty()) metrics_ = std::make_unique<MetricsWriter>(metrics_file, append);
  if (!tensorboard_dir.empty()) events_ = std::make_unique<EventFileWriter>(tensorboard_dir, "--tensorboard-dir");
}

namespace {

// TensorBoard tags of a record's keys, in the order they are written.
std::vector<std::pair<std::string, double>> tagged(const nlohmann::json& record,
                                                   std::initializer_list<std::pair<const char*, const char*>> keys) {
  std::vector<std::pair<std::string, double>> v;
  for (const auto& [key, tag] : keys) v.emplace_back(tag, record.at(key).get<double>());
  return v;
}

}  // namespace

void RunRecords::epoch(const nlohmann::json& record, bool eval) {
  write(record);
  if (!events_) return;
  auto v = tagged(record, {{"train_loss", "epoch/train_loss"}, {"train_acc", "epoch/train_accuracy"},
                           {"images_per_sec", "epoch/images_per_sec"}, {"seconds", "epoch/seconds"}});
  if (eval)
    for (auto& t : tagged(record, {{"test_loss", "epoch/test_loss"}, {"test_acc", "epoch/test_accuracy"}}))
      v.push_back(std::move(t));
  if (record.contains("tokens_per_sec"))  // language models
    for (auto& t : tagged(record, {{"tokens_per_sec", "epoch/tokens_per_sec"}, {"mfu", "epoch/mfu"}}))
      v.push_back(std::move(t));
  if (eval && record.contains("val_loss"))
    for (auto& t : tagged(record, {{"val_loss", "epoch/val_loss"}, {"val_perplexity", "epoch/val_perplexity"}}))
      v.push_back(std::move(t));
  events_->scalars(record.at("step").get<int64_t>(), v);
}

void RunRecords::loss_scale(const nlohmann::json& record) {
  write(record);
  if (events_)
    events_->scalars(record.at("step").get<int64_t>(),
                     tagged(record, {{"loss_scale", "train/loss_scale"}, {"skipped_steps", "train/skipped_steps"}}));
}

void RunRecords::grad_clip(const nlohmann::json& record) {
  write(record);
  if (events_)
    events_->scalars(record.at("step").get<int64_t>(), tagged(record, {{"clipped_steps", "train/clipped_steps"}}));
}

void RunRecords::restart(const nlohmann::json& record) {
  write(record);
  if (!events_) return;
  std::vector<std::pair<std::string, double>> v;
  for (const auto& [key, tag] : std::initializer_list<std::pair<const char*, const char*>>{
           {"attempt", "restart/attempt"}, {"world", "restart/world"}, {"steps_lost", "restart/steps_lost"},
           {"recover_seconds", "restart/recover_seconds"}})
    if (record.contains(key) && record[key].is_number()) v.emplace_back(tag, record[key].get<double>());
  events_->scalars(record.at("step").get<int64_t>(), v);
}

void RunRecords::step(int64_t step, const LossStats& so_far, double lr, std::optional<double> grad_norm) {
  if (!events_) return;
  if (so_far.count > seen_.count) {
    const double loss = (so_far.loss_sum - seen_.loss_sum) / static_cast<double>(so_far.count - seen_.count);
    std::vector<std::pair<std::string, double>> v{{"train/loss_rank0", loss}, {"train/lr", lr}};
    if (grad_norm) v.emplace_back("train/grad_norm", *grad_norm);
    events_->scalars(step, v);
  }
  seen_ = so_far;
}

}  // namespace lockstep
