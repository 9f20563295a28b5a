// The trainer options' filesystem checks (check_option_paths, options.h):
// data directory, GPU, and the places outputs go, before any work.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "device_check.h"
#include "options.h"

namespace lockstep {
namespace {

// The run creates files in `dir` only once training has begun, or ended
// (--save-weights): find out now that it cannot, by making an empty file there
// and removing it. The permission bits alone (access()) pass root everywhere
// but a read-only mount, also where no file can be made (/proc, an immutable
// directory).
void check_writable(const char* flag, const std::filesystem::path& dir) {
  std::string probe = (dir / ".lockstep-probe-XXXXXX").string();
  const int fd = mkstemp(probe.data());
  LS_CHECK_INPUT(fd >= 0, "--{}: cannot write to directory {} ({})", flag, dir.string(), std::strerror(errno));
  close(fd);
  unlink(probe.c_str());
}

}  // namespace

void check_option_paths(const TrainConfig& c, bool rank0) {
  namespace fs = std::filesystem;
  if (c.dataset != DatasetKind::Synthetic)
    LS_CHECK_INPUT(fs::is_directory(c.data_dir), "--data-dir: {} is not a directory", c.data_dir);
  if (c.device == DeviceKind::Cuda) check_cuda_device_usable();
  if (!c.timeline.empty()) {  // every rank writes its own trace
    const fs::path p(c.timeline);
    const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    LS_CHECK_INPUT(fs::is_directory(dir), "--timeline: directory {} does not exist", dir.string());
    check_writable("timeline", dir);
  }
  if (!rank0) return;
  // Directories rank 0 writes into, created if missing: the parent must exist.
  for (const auto& [flag, dir] :
       {std::pair{"checkpoint-dir", c.checkpoint_dir}, std::pair{"tensorboard-dir", c.tensorboard_dir}}) {
    if (dir.empty()) continue;
    const fs::path d(dir);
    if (!fs::exists(d)) {
      const fs::path parent = d.has_parent_path() ? d.parent_path() : fs::path(".");
      LS_CHECK_INPUT(fs::is_directory(parent), "--{}: parent directory {} does not exist", flag, parent.string());
      check_writable(flag, parent);
    } else {
      LS_CHECK_INPUT(fs::is_directory(d), "--{}: {} is not a directory", flag, dir);
      check_writable(flag, d);
    }
  }
  for (const auto& [flag, path] :
       {std::pair{"metrics-file", c.metrics_file}, std::pair{"save-weights", c.save_weights}}) {
    if (path.empty()) continue;
    const fs::path p(path);
    const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    LS_CHECK_INPUT(fs::is_directory(dir), "--{}: directory {} does not exist", flag, dir.string());
    LS_CHECK_INPUT(!fs::is_directory(p), "--{}: {} is a directory", flag, path);
    check_writable(flag, dir);
  }
  if (!c.load_weights.empty())
    LS_CHECK_INPUT(fs::is_regular_file(c.load_weights), "--load-weights: {} is not a file", c.load_weights);
}

}  // namespace lockstep
