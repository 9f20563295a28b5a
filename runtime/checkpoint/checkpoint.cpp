// Checkpoint save, listing, retention and validated loading.
#include "checkpoint/checkpoint.h"

#include <cmath>
#include <cstdlib>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <regex>

#include "checkpoint/checksums.h"
#include "core/input_subject.h"
#include "checkpoint/safetensors.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
constexpr const char* kFormat = "lockstep-checkpoint";
constexpr const char* kVersion = "2";  // 2: CRC-32 per tensor and of the metadata

int64_t step_of(const std::string& filename) {
  static const std::regex re(R"(ckpt-(\d{9})\.safetensors)");
  std::smatch m;
  return std::regex_match(filename, m, re) ? std::stoll(m[1]) : -1;
}

int64_t meta_int(const SafetensorsFile& f, const std::string& key) {
  auto it = f.metadata().find(key);
  LS_CHECK_INPUT(it != f.metadata().end(), "{}: checkpoint metadata lacks '{}'", f.path(), key);
  try {
    size_t used = 0;
    const int64_t v = std::stoll(it->second, &used);
    LS_CHECK_INPUT(used == it->second.size(), "{}: metadata '{}' = '{}' is not an integer", f.path(), key, it->second);
    return v;
  } catch (const std::logic_error&) {
    LS_INPUT_ERROR("{}: metadata '{}' = '{}' is not an integer", f.path(), key, it->second);
  }
}

std::string meta_str(const SafetensorsFile& f, const std::string& key) {
  auto it = f.metadata().find(key);
  LS_CHECK_INPUT(it != f.metadata().end(), "{}: checkpoint metadata lacks '{}'", f.path(), key);
  return it->second;
}

// Validates `f` against the model and optimizer; throws InputError naming what differs.
void validate(const SafetensorsFile& f, const Model& model, Optimizer& opt) {
  // Checksums first: a damaged file is reported as damaged, whatever else it says.
  verify_checksums(f, /*required=*/true);
  LS_CHECK_INPUT(meta_str(f, "format") == kFormat && meta_str(f, "version") == kVersion,
                 "{}: not a lockstep checkpoint (format {} version {})", f.path(), meta_str(f, "format"),
                 meta_str(f, "version"));
  LS_CHECK_INPUT(meta_str(f, "model") == model.name(), "{}: checkpoint of model {}, this run trains {}", f.path(),
                 meta_str(f, "model"), model.name());
  LS_CHECK_INPUT(meta_str(f, "optimizer") == opt.name(), "{}: checkpoint of optimizer {}, this run uses {}", f.path(),
                 meta_str(f, "optimizer"), opt.name());
  size_t expected = 0;
  for (const Parameter* p : model.state()) {
    const std::string name = "model." + p->name;
    LS_CHECK_INPUT(f.contains(name), "{}: missing tensor '{}'", f.path(), name);
    const auto& e = f.entry(name);
    LS_CHECK_INPUT(e.dtype == DType::F32 && e.shape == p->shape, "{}: tensor '{}' is {} {}, expected F32 {}", f.path(),
                   name, dtype_name(e.dtype), e.shape.str(), p->shape.str());
    ++expected;
  }
  for (auto& [sname, t] : opt.state()) {
    const std::string name = "optimizer." + sname;
    LS_CHECK_INPUT(f.contains(name), "{}: missing tensor '{}'", f.path(), name);
    const auto& e = f.entry(name);
    LS_CHECK_INPUT(e.dtype == DType::F32 && e.shape == t->shape(), "{}: tensor '{}' is {} {}, expected F32 {}",
                   f.path(), name, dtype_name(e.dtype), e.shape.str(), t->shape().str());
    ++expected;
  }
  LS_CHECK_INPUT(f.names().size() == expected, "{}: {} tensors, this model and optimizer have {}", f.path(),
                 f.names().size(), expected);
}

// Temporaries of checkpoint writes that never finished (the writer was killed
// mid-write): ".ckpt-<step>.safetensors.tmp-XXXXXX". Only rank 0 of one job
// writes a checkpoint directory, so any that exist when it starts a write are stale.
void remove_stale_temporaries(const std::string& dir) {
  static const std::regex re(R"(\.ckpt-\d{9}\.safetensors\.tmp-.{6})");
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (std::regex_match(e.path().filename().string(), re)) fs::remove(e.path(), ec);
}

}  // namespace

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const int64_t step = step_of(e.path().filename().string());
    if (step >= 0 && e.is_regular_file(ec)) found.emplace_back(step, e.path().string());
  }
  std::sort(found.begin(), found.end(), std::greater<>());
  std::vector<std::string> out;
  for (auto& [s, p] : found) out.push_back(p);
  return out;
}

std::string save_checkpoint(const std::string& dir, const Model& model, Optimizer& opt, const CheckpointInfo& info,
                            int keep) {
  return save_checkpoint(dir, model, opt, info, keep, opt.state());
}

std::string save_checkpoint(const std::string& dir, const Model& model, Optimizer& opt, const CheckpointInfo& info,
                            int keep, const std::vector<std::pair<std::string, Tensor*>>& opt_state) {
  CheckpointImage image = checkpoint_image(model, opt, info, opt_state, nullptr);
  return write_checkpoint(dir, image, keep);
}

CheckpointImage checkpoint_image(const Model& model, Optimizer& opt, const CheckpointInfo& info,
                                 const std::vector<std::pair<std::string, Tensor*>>& opt_state,
                                 std::vector<Tensor>* staging) {
  for (const auto& [name, t] : opt_state)
    LS_CHECK(t->numel() == model.params().padded_numel(), "save_checkpoint: optimizer state '{}' has {} values, not "
             "the whole layout's {} (a sharded optimizer's state must be gathered first)", name, t->numel(),
             model.params().padded_numel());
  CheckpointImage image;
  image.step = info.progress.step;
  std::vector<std::pair<std::string, const Tensor*>> sources;
  for (const Parameter* p : model.state()) sources.emplace_back("model." + p->name, &p->value);
  for (auto& [name, t] : opt_state) sources.emplace_back("optimizer." + name, t);
  if (staging != nullptr) staging->resize(sources.size());
  image.host.reserve(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    const Tensor& src = *sources[i].second;
    if (staging == nullptr) {
      image.host.push_back(on_host(src));  // the tensor itself on the CPU, a copy of a GPU one
    } else {
      Tensor& dst = (*staging)[i];
      if (!dst.defined() || dst.shape() != src.shape() || dst.dtype() != src.dtype())
        dst = Tensor::zeros(src.shape(), src.dtype());  // kept for the next checkpoint: no fresh pages each time
      dst.copy_from(src);
      image.host.push_back(dst);
    }
    image.entries.push_back({sources[i].first, DType::F32, src.shape(), image.host.back().raw_data()});
  }
  const TrainingProgress& pr = info.progress;
  image.meta = {
      {"format", kFormat},
      {"version", kVersion},
      {"model", model.name()},
      {"optimizer", opt.name()},
      {"optimizer_steps", std::to_string(info.optimizer_steps >= 0 ? info.optimizer_steps : opt.steps())},
      {"step", std::to_string(pr.step)},
      {"epoch", std::to_string(pr.epoch)},
      {"step_in_epoch", std::to_string(pr.step_in_epoch)},
      {"global_batch", std::to_string(info.global_batch)},
      {"seed", std::to_string(info.seed)},
      {"world_size", std::to_string(info.world_size)},
      {"config", info.config_json},
  };
  if (info.loss_scale > 0.f) {
    image.meta["loss_scale"] = fmt::format("{}", info.loss_scale);  // shortest form that reads back exactly
    image.meta["loss_scale_good_steps"] = std::to_string(info.loss_scale_good_steps);
    image.meta["skipped_steps"] = std::to_string(info.skipped_steps);
  }
  return image;
}

std::string write_checkpoint(const std::string& dir, CheckpointImage& image, int keep) {
  add_checksums(image.entries, image.meta);
  const std::string path = (fs::path(dir) / fmt::format("ckpt-{:09d}.safetensors", image.step)).string();
  // Created at the first write, not at start-up, so a run that fails before
  // it leaves no empty directory behind.
  std::error_code ec;
  fs::create_directory(dir, ec);
  LS_CHECK_INPUT_ON(!ec, subject::kCheckpointDirectory, ": cannot create {} ({})", dir, ec.message());
  remove_stale_temporaries(dir);
  write_safetensors(path, image.entries, image.meta);
  const std::vector<std::string> all = list_checkpoints(dir);
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < all.size(); ++i) {
    std::error_code ec;
    fs::remove(all[i], ec);
  }
  return path;
}

std::optional<LoadedCheckpoint> load_latest_checkpoint(const std::string& dir, Model& model, Optimizer& opt,
                                                       const std::function<void(const std::string&)>& warn) {
  LS_CHECK(!opt.sharded(), "load_latest_checkpoint: the optimizer is sharded; load into rank 0's optimizer before "
           "the DistributedOptimizer shards it");
  const std::vector<std::string> files = list_checkpoints(dir);
  if (files.empty()) return std::nullopt;
  // Problems with newer files are reported only when an older one is then
  // used; when none is usable the error alone says what is wrong (one line).
  std::vector<std::string> skipped;
  std::string newest_error;
  for (const std::string& path : files) {
    try {
      const SafetensorsFile f = SafetensorsFile::read(path);
      validate(f, model, opt);
      LoadedCheckpoint lc;
      lc.path = path;
      lc.info.progress = {meta_int(f, "step"), meta_int(f, "epoch"), meta_int(f, "step_in_epoch")};
      lc.info.global_batch = meta_int(f, "global_batch");
      lc.info.seed = static_cast<uint64_t>(meta_int(f, "seed"));
      lc.info.world_size = static_cast<int>(meta_int(f, "world_size"));
      lc.info.config_json = meta_str(f, "config");
      const int64_t opt_steps = meta_int(f, "optimizer_steps");
      if (f.metadata().count("loss_scale")) {
        const std::string& v = f.metadata().at("loss_scale");
        char* end = nullptr;
        const float scale = std::strtof(v.c_str(), &end);
        LS_CHECK_INPUT(end == v.c_str() + v.size() && std::isfinite(scale) && scale > 0.f,
                       "{}: metadata 'loss_scale' = '{}' is not a positive number", path, v);
        lc.info.loss_scale = scale;
        lc.info.loss_scale_good_steps = meta_int(f, "loss_scale_good_steps");
        lc.info.skipped_steps = meta_int(f, "skipped_steps");
        LS_CHECK_INPUT(lc.info.loss_scale_good_steps >= 0 && lc.info.skipped_steps >= 0,
                       "{}: negative loss-scale counters in the metadata", path);
      }
      // Everything checked: now copy into the model and optimizer.
      for (Parameter* p : model.state()) {
        const auto& e = f.entry("model." + p->name);
        copy_from_host(p->value, e.data);
      }
      for (auto& [name, t] : opt.state()) {
        const auto& e = f.entry("optimizer." + name);
        copy_from_host(*t, e.data);
      }
      opt.set_steps(opt_steps);
      for (const std::string& w : skipped) warn(w);
      return lc;
    } catch (const InputError& e) {
      if (newest_error.empty()) newest_error = e.message();
      skipped.push_back(fmt::format("skipping checkpoint {}: {}", path, e.message()));
    }
  }
  LS_INPUT_ERROR_ON(subject::kResume, ": no usable checkpoint in {} ({} found; the newest: {})", dir, files.size(),
                    newest_error);
}

}  // namespace lockstep
