// Fuzz target for the trainer's configuration (launcher/options.h): the input
// is split into lines; "LOCKSTEP_NAME=value" lines become environment
// variables, every other line one command-line argument. Whatever parses must
// give a configuration inside the documented ranges, with every integer equal
// to the text it came from (no silent wrap-around), and must describe itself
// (describe_settings, config_json) without throwing.
#include <charconv>
#include <cstdlib>
#include <iostream>
#include <streambuf>

#include "core/error.h"
#include "fuzz_util.h"
#include "options.h"

extern char** environ;

using namespace lockstep;

namespace {

// --help goes here instead of the terminal.
struct NullBuffer : std::streambuf {
  int overflow(int c) override { return c; }
};

void unset_lockstep_variables() {
  std::vector<std::string> names;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    if (kv.rfind("LOCKSTEP_", 0) == 0) names.push_back(kv.substr(0, kv.find('=')));
  }
  for (const auto& n : names) unsetenv(n.c_str());
}

void check_int(const TrainConfig& c, const std::string& option, int64_t value) {
  for (const OptionSetting& s : c.settings) {
    if (s.option != option) continue;
    int64_t parsed = 0;
    const auto [p, ec] = std::from_chars(s.value.data(), s.value.data() + s.value.size(), parsed);
    if (ec != std::errc() || p != s.value.data() + s.value.size() || parsed != value)
      fuzz::fail("an integer option's value differs from the text it was given");
    return;
  }
  fuzz::fail("an option is missing from the settings");
}

void check_config(const TrainConfig& c) {
  check_int(c, "epochs", c.epochs);
  check_int(c, "max-steps", c.max_steps);
  check_int(c, "batch-size", c.batch_size);
  check_int(c, "global-batch-size", c.global_batch_size);
  check_int(c, "eval-batch-size", c.eval_batch_size);
  check_int(c, "accumulate-steps", c.accumulate_steps);
  // Not given: the model's class count (models/registry.h); 0 samples: --benchmark sizes the data itself.
  bool classes_given = false;
  for (const OptionSetting& s : c.settings) classes_given |= s.option == "synthetic-classes" && !s.value.empty();
  if (classes_given) check_int(c, "synthetic-classes", c.synthetic_classes);
  if (c.synthetic_samples != 0) check_int(c, "synthetic-samples", c.synthetic_samples);
  check_int(c, "base-batch-size", c.base_batch_size);
  check_int(c, "image-size", c.image_size);
  check_int(c, "threads", c.threads);
  check_int(c, "checkpoint-every", c.checkpoint_every);
  check_int(c, "keep-checkpoints", c.keep_checkpoints);
  if (c.epochs <= 0 || c.batch_size <= 0 || c.accumulate_steps < 1 || c.accumulate_steps > 4096 || c.threads < 0 ||
      c.threads > 1024 || c.keep_checkpoints < 1 || c.synthetic_samples < 0 ||
      (c.synthetic_samples == 0 && !c.benchmark) || c.base_batch_size <= 0 || c.image_size < 0)
    fuzz::fail("a parsed configuration is outside the documented ranges");
  if (!(c.label_smoothing >= 0.f && c.label_smoothing < 1.f) || (c.benchmark && (c.eval || c.dataset != DatasetKind::Synthetic)))
    fuzz::fail("a parsed recipe or benchmark setting is outside the documented ranges");
  if (c.synthetic_shape.size() != 3) fuzz::fail("--synthetic-shape parsed to other than 3 extents");
  for (int64_t d : c.synthetic_shape)
    if (d <= 0 || d > (1 << 24)) fuzz::fail("--synthetic-shape parsed to a bad extent");
  if (!(c.lr > 0.f) || !(c.lr_gamma > 0.f && c.lr_gamma <= 1.f) || !(c.momentum >= 0.f && c.momentum < 1.f))
    fuzz::fail("a parsed learning-rate setting is outside the documented ranges");
  if (describe_settings(c).empty() || config_json(c).empty()) fuzz::fail("empty configuration description");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Never destroyed: std::cout keeps using it until the last static destructor
  // (libstdc++ flushes cout at exit, after a function-local static is gone).
  static NullBuffer* const null_buffer = new NullBuffer;
  static const bool quiet = (std::cout.rdbuf(null_buffer), unset_lockstep_variables(), true);
  (void)quiet;
  std::vector<std::string> args{"trainer"};
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    const size_t eq = line.find('=');
    if (line.rfind("LOCKSTEP_", 0) == 0 && eq != std::string::npos) {
      // setenv stops at a NUL byte, as a real environment would.
      setenv(line.substr(0, eq).c_str(), line.substr(eq + 1).c_str(), 1);
    } else if (line.rfind("--version", 0) == 0) {
      unset_lockstep_variables();  // --version hashes the whole executable: slow, and no parsing
      return 0;
    } else if (!(line.empty() && start > text.size())) {
      args.push_back(line);
    }
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  try {
    TrainConfig c;
    if (parse_train_options(static_cast<int>(args.size()), argv.data(), c) == ParseOutcome::Run) check_config(c);
  } catch (const InputError&) {
  }
  unset_lockstep_variables();
  return 0;
}
