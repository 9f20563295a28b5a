// Shared by the fuzz harnesses: a per-process scratch directory (on /dev/shm
// when it exists) for inputs that the readers take as files, and the tiny
// model + optimizer the checkpoint harness and the seed generator agree on.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "nn/layers.h"
#include "nn/model.h"
#include "optim/optimizer.h"
#include "temp_dir.h"

namespace lockstep::fuzz {

// A property the harness checks does not hold: a finding, like a crash.
[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "fuzz harness: %s\n", what);
  std::abort();
}

using ScratchDir = lockstep::testing::TempDir;

// On /dev/shm when it exists (inputs are written there every iteration).
inline std::filesystem::path scratch_base() {
  return std::filesystem::is_directory("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                  : std::filesystem::temp_directory_path();
}

// Removed when the process exits normally (a crashing input leaves it behind,
// which is what one wants for a post-mortem).
inline ScratchDir& scratch() {
  static ScratchDir dir(scratch_base());
  return dir;
}

inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!f) fail("cannot write to the scratch directory");  // not the input's fault
}

// Flatten, Linear(4, 3), ReLU, Linear(3, 2) on [1, 2, 2] samples: 23 parameters,
// so checkpoints of it are a few hundred bytes.
inline std::unique_ptr<Model> tiny_model() {
  Sequential net;
  net.add(std::make_unique<Flatten>());
  net.add(std::make_unique<Linear>(4, 3));
  net.add(std::make_unique<ReLU>());
  net.add(std::make_unique<Linear>(3, 2));
  return std::make_unique<Model>("tiny", std::move(net), Shape{1, 2, 2}, 2, 1);
}

inline std::unique_ptr<Optimizer> tiny_optimizer(Model& model) {
  return make_optimizer(model.params(), OptimizerConfig{});  // SGD with momentum: one state tensor
}

}  // namespace lockstep::fuzz
