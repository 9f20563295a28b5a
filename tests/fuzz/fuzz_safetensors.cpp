// Fuzz target for the safetensors reader and the two loaders built on it:
// SafetensorsFile::read, load_weights and load_latest_checkpoint (the input as
// the only checkpoint of a directory), into a tiny model and SGD optimizer.
// Checkpoints carry CRC-32s that random mutations almost never match, so when
// the input parses, it is also rewritten with its metadata checksum (and then
// also its tensor checksums) recomputed and loaded again: that lets the fuzzer
// reach the checks behind the checksums.
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checksums.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/weights.h"
#include "core/error.h"
#include "fuzz_util.h"

using namespace lockstep;
namespace fs = std::filesystem;

namespace {

uint32_t crc32_of(const void* data, size_t n) {
  return static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), static_cast<const Bytef*>(data), static_cast<uInt>(n)));
}

// As checksums.cpp computes it: every other key and value, in key order.
uint32_t metadata_crc(const std::map<std::string, std::string>& meta) {
  std::string all;
  for (const auto& [k, v] : meta) {
    if (k == "metadata_crc32") continue;
    all += k + '\0' + v + '\0';
  }
  return crc32_of(all.data(), all.size());
}

// Reads every byte of every tensor (so ASan sees any entry pointing outside the
// file) and checks what the reader promises about names and sizes.
void check_file(const SafetensorsFile& f) {
  std::set<std::string> seen;
  uint64_t sum = 0;
  for (const std::string& name : f.names()) {
    if (!seen.insert(name).second) fuzz::fail("SafetensorsFile::names() lists a tensor twice");
    if (!f.contains(name) || name == "__metadata__") fuzz::fail("SafetensorsFile::names() and contains() disagree");
    const SafetensorsEntry& e = f.entry(name);
    if (e.name != name || e.shape.numel() < 0) fuzz::fail("SafetensorsFile::entry() is inconsistent");
    const auto* p = static_cast<const uint8_t*>(e.data);
    for (size_t i = 0; i < e.nbytes(); ++i) sum += p[i];
  }
  volatile uint64_t sink = sum;
  (void)sink;
}

// After a successful load, the model (and optimizer) hold exactly the file's bytes.
void check_copied(const SafetensorsFile& f, const std::string& prefix, Model& model, Optimizer* opt) {
  for (const auto& p : model.params().params()) {
    const SafetensorsEntry& e = f.entry(prefix + p.name);
    if (e.nbytes() != static_cast<size_t>(p.shape.numel()) * 4 || std::memcmp(p.value.raw_data(), e.data, e.nbytes()) != 0)
      fuzz::fail("a successful load left the model different from the file");
  }
  if (opt)
    for (auto& [name, t] : opt->state()) {
      const SafetensorsEntry& e = f.entry("optimizer." + name);
      if (e.nbytes() != t->nbytes() || std::memcmp(t->raw_data(), e.data, e.nbytes()) != 0)
        fuzz::fail("a successful load left the optimizer different from the file");
    }
}

void load_weights_checked(const std::string& path, const SafetensorsFile* f, Model& model) {
  try {
    load_weights(path, model);
    if (!f) fuzz::fail("load_weights accepted a file SafetensorsFile::read rejects");
    check_copied(*f, "", model, nullptr);
  } catch (const InputError&) {
  }
}

// Loads `dir`'s only checkpoint, `path`, whose tensors are those of `f`.
void load_checkpoint(const std::string& dir, const std::string& path, const SafetensorsFile* f, Model& model,
                     Optimizer& opt) {
  try {
    const auto loaded = load_latest_checkpoint(dir, model, opt, [](const std::string&) {});
    if (!loaded || loaded->path != path) fuzz::fail("load_latest_checkpoint did not load the only checkpoint");
    if (!f) fuzz::fail("load_latest_checkpoint accepted a file SafetensorsFile::read rejects");
    check_copied(*f, "model.", model, &opt);
  } catch (const InputError&) {
  }
}

// `f` written again with metadata_crc32 recomputed (keeping its tensor_crc32),
// or, with `tensors`, with both recomputed as lockstep's writers do.
void write_with_fixed_checksums(const SafetensorsFile& f, bool tensors, const std::string& path) {
  std::vector<SafetensorsEntry> entries;
  for (const std::string& name : f.names()) entries.push_back(f.entry(name));
  std::map<std::string, std::string> meta = f.metadata();
  if (tensors)
    add_checksums(entries, meta);
  else
    meta["metadata_crc32"] = fmt::format("{:08x}", metadata_crc(meta));
  write_safetensors(path, entries, meta);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto model = fuzz::tiny_model();
  static const auto opt = fuzz::tiny_optimizer(*model);
  static const std::string dir = (fuzz::scratch().path() / "raw").string();
  static const std::string fixed_dir = (fuzz::scratch().path() / "fixed").string();
  static const bool made = fs::create_directory(dir) && fs::create_directory(fixed_dir);
  if (!made) fuzz::fail("cannot create the checkpoint directories");
  const std::string path = (fs::path(dir) / "ckpt-000000001.safetensors").string();
  fuzz::write_file(path, data, size);

  std::optional<SafetensorsFile> f;
  try {
    f.emplace(SafetensorsFile::read(path));
    check_file(*f);
  } catch (const InputError&) {
  }
  load_weights_checked(path, f ? &*f : nullptr, *model);
  load_checkpoint(dir, path, f ? &*f : nullptr, *model, *opt);
  if (!f) return 0;

  // Names the writers refuse (the reader accepts them; the loaders then reject them).
  bool separators = false;
  for (const std::string& name : f->names()) {
    if (name.empty()) return 0;
    separators = separators || name.find_first_of("=;") != std::string::npos;
  }
  const std::string fixed = (fs::path(fixed_dir) / "ckpt-000000001.safetensors").string();
  for (bool tensors : {false, true}) {
    if (tensors && separators) break;
    write_with_fixed_checksums(*f, tensors, fixed);
    const SafetensorsFile g = SafetensorsFile::read(fixed);  // what we wrote must read back
    load_weights_checked(fixed, &g, *model);
    load_checkpoint(fixed_dir, fixed, &g, *model, *opt);
  }
  return 0;
}
