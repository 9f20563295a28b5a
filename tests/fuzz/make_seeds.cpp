// Writes the generated seed inputs of the binary fuzz corpora (IDX files,
// safetensors files, weights and a checkpoint of the harness's tiny model)
// into CORPUS_DIR/<target>/seed-*. Run by hand after a format change:
//   build/fuzz_make_seeds tests/fuzz/corpus
// The text corpora (hostfile, options) are written by hand. Crash inputs kept
// as regressions (regress-*) are never touched.
#include <cstdio>
#include <filesystem>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/weights.h"
#include "data/idx.h"
#include "fuzz_util.h"

using namespace lockstep;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> iota_bytes(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 37 + 11);
  return v;
}

void idx_seeds(const fs::path& dir) {
  write_idx((dir / "seed-labels.idx").string(), {12}, iota_bytes(12), false);
  write_idx((dir / "seed-images.idx").string(), {3, 4, 5}, iota_bytes(60), false);
  write_idx((dir / "seed-images.idx.gz").string(), {3, 4, 5}, iota_bytes(60), true);
  write_idx((dir / "seed-4d.idx").string(), {2, 1, 3, 2}, iota_bytes(12), false);
  write_idx((dir / "seed-labels.idx.gz").string(), {7}, iota_bytes(7), true);
}

void safetensors_seeds(const fs::path& dir) {
  const std::vector<float> a{1.5f, -2.f, 3.25f, 4.f, 5.f, 6.f};
  const std::vector<int64_t> b{7, -8};
  const std::vector<uint16_t> h{0x3c00, 0xc000, 0x7bff};
  const std::vector<uint8_t> none;
  write_safetensors((dir / "seed-dtypes.safetensors").string(),
                    {{"a", DType::F32, Shape{2, 3}, a.data()},
                     {"b", DType::I64, Shape{2}, b.data()},
                     {"h", DType::F16, Shape{3, 1}, h.data()},
                     {"empty", DType::U8, Shape{0, 4}, none.data()}},
                    {{"format", "pt"}, {"note", "seed"}});
  auto model = fuzz::tiny_model();
  auto opt = fuzz::tiny_optimizer(*model);
  save_weights((dir / "seed-weights.safetensors").string(), *model);
  fuzz::ScratchDir tmp;
  CheckpointInfo info;
  info.progress = {7, 1, 3};
  info.global_batch = 8;
  info.config_json = R"({"model":"tiny"})";
  const std::string written = save_checkpoint(tmp.path().string(), *model, *opt, info, 1);
  fs::copy_file(written, dir / "seed-checkpoint.safetensors", fs::copy_options::overwrite_existing);
  // The seeds must reach the loaders' success paths, or the fuzzer starts from errors only.
  auto model2 = fuzz::tiny_model();
  auto opt2 = fuzz::tiny_optimizer(*model2);
  load_weights((dir / "seed-weights.safetensors").string(), *model2);
  if (!load_latest_checkpoint(tmp.path().string(), *model2, *opt2, [](const std::string&) {}))
    fuzz::fail("the seed checkpoint does not load");
  for (const char* name : {"seed-dtypes.safetensors", "seed-weights.safetensors", "seed-checkpoint.safetensors"})
    fs::permissions(dir / name, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                    fs::perms::others_read);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  fs::create_directories(root / "idx");
  fs::create_directories(root / "safetensors");
  idx_seeds(root / "idx");
  safetensors_seeds(root / "safetensors");
  std::printf("seeds written under %s\n", root.string().c_str());
  return 0;
}
