// GPT-2 weights files in Hugging Face's names and layout (models/gpt2_names.h):
// what save_weights writes, the file forms load_weights accepts, the one-line
// errors that leave the model unchanged, and checkpoints keeping lockstep's names.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>

#include "checkpoint/checkpoint.h"
#include "checkpoint/weights.h"
#include "optim/optimizer.h"
#include "registry.h"
#include "temp_dir.h"

using namespace lockstep;
using lockstep::testing::TempDir;

namespace {

// 2 blocks of 32 channels, 4 heads; vocabulary 100 in 128 rows.
constexpr int64_t kC = 32, kVocab = 100;
std::unique_ptr<Model> tiny(uint64_t seed) { return models::build_model("gpt2-tiny", {Shape{16}, kVocab, 2, 4, kC}, seed); }

const float* value(const Model& m, const char* name) { return m.params().find(name)->value.data<float>(); }

// The entries of a saved file, renamed by `rename` (empty: dropped).
std::vector<SafetensorsEntry> entries_of(const SafetensorsFile& f, const std::function<std::string(std::string)>& rename) {
  std::vector<SafetensorsEntry> out;
  for (const auto& n : f.names()) {
    SafetensorsEntry e = f.entry(n);
    e.name = rename(n);
    if (!e.name.empty()) out.push_back(e);
  }
  return out;
}

}  // namespace

TEST_CASE("GPT-2 weights are written in Hugging Face's names and layout", "[safetensors][transformer]") {
  TempDir dir;
  auto a = tiny(1);
  save_weights(dir.file("w.safetensors"), *a);
  const auto f = SafetensorsFile::read(dir.file("w.safetensors"));
  CHECK(f.names().size() == 2 + 2 * 12 + 2);
  CHECK(f.names().front() == "transformer.wte.weight");
  CHECK(f.entry("transformer.wte.weight").shape == (Shape{kVocab, kC}));  // the 28 padding rows left out
  CHECK(f.entry("transformer.wpe.weight").shape == (Shape{256, kC}));
  CHECK(f.entry("transformer.h.1.mlp.c_fc.weight").shape == (Shape{kC, 4 * kC}));
  CHECK(f.entry("transformer.h.1.mlp.c_proj.bias").shape == (Shape{kC}));
  CHECK(f.entry("transformer.ln_f.weight").shape == (Shape{kC}));
  // Conv1D: c_attn.weight[i][o] is the Linear's weight[o][i].
  const auto& qkv = f.entry("transformer.h.0.attn.c_attn.weight");
  REQUIRE(qkv.shape == (Shape{kC, 3 * kC}));
  const float* lin = value(*a, "layers.1.branch.1.weight");
  const float* conv = static_cast<const float*>(qkv.data);
  CHECK(conv[5 * 3 * kC + 70] == lin[70 * kC + 5]);
  CHECK(std::memcmp(f.entry("transformer.wte.weight").data, value(*a, "layers.0.wte"), kVocab * kC * 4) == 0);

  // Round trip; the padding rows come back zero whatever they held.
  auto b = tiny(2);
  float* pad = b->params().find("layers.0.wte")->value.data<float>() + kVocab * kC;
  std::fill(pad, pad + 28 * kC, 1.f);
  load_weights(dir.file("w.safetensors"), *b);
  CHECK(a->params().values().to_vector() == b->params().values().to_vector());

  // Checkpoints keep lockstep's own names.
  auto opt = make_optimizer(a->params(), OptimizerConfig{});
  CheckpointInfo info;
  info.global_batch = 4;
  save_checkpoint(dir.file("ckpt"), *a, *opt, info, 1);
  const auto ckpt = SafetensorsFile::read(list_checkpoints(dir.file("ckpt")).back());
  CHECK(ckpt.contains("model.layers.0.wte"));
  CHECK(ckpt.entry("model.layers.0.wte").shape == (Shape{128, kC}));
}

TEST_CASE("GPT-2 weights load from Hugging Face's file forms, and mismatches are one-line errors", "[safetensors][transformer]") {
  TempDir dir;
  auto a = tiny(1);
  save_weights(dir.file("w.safetensors"), *a);
  const auto f = SafetensorsFile::read(dir.file("w.safetensors"));
  const std::vector<uint8_t> mask(256 * 256, 1);
  const float masked_bias = -1e4f;
  std::vector<float> other_head(kVocab * kC, 0.5f);

  auto loads = [&](const std::string& name, std::vector<SafetensorsEntry> entries) {
    write_safetensors(dir.file(name), entries);
    auto m = tiny(3);
    load_weights(dir.file(name), *m);
    CHECK(m->params().values().to_vector() == a->params().values().to_vector());
  };
  // GPT2LMHeadModel's state_dict: the lm_head copy and the causal-mask buffers.
  auto lm = entries_of(f, [](std::string n) { return n; });
  lm.push_back({"lm_head.weight", DType::F32, Shape{kVocab, kC}, f.entry("transformer.wte.weight").data});
  for (const char* l : {"0", "1"}) {
    lm.push_back({fmt::format("transformer.h.{}.attn.bias", l), DType::U8, Shape{1, 1, 256, 256}, mask.data()});
    lm.push_back({fmt::format("transformer.h.{}.attn.masked_bias", l), DType::F32, Shape{}, &masked_bias});
  }
  loads("lm.safetensors", lm);
  // The hub's gpt2 files: the bare transformer's names.
  auto bare = entries_of(f, [](std::string n) { return n.substr(std::string("transformer.").size()); });
  bare.push_back({"h.1.attn.bias", DType::U8, Shape{1, 1, 256, 256}, mask.data()});
  loads("bare.safetensors", bare);

  auto expect_error = [&](const std::string& name, std::vector<SafetensorsEntry> entries, const std::string& text) {
    write_safetensors(dir.file(name), entries);
    auto m = tiny(3);
    const auto before = m->params().values().to_vector();
    try {
      load_weights(dir.file(name), *m);
      FAIL("loaded " << name);
    } catch (const InputError& e) {
      INFO(e.message());
      CHECK(e.message().find(dir.file(name) + ": " + text) == 0);
      CHECK(e.message().find('\n') == std::string::npos);
    }
    CHECK(m->params().values().to_vector() == before);
  };
  auto untied = lm;
  for (auto& e : untied)
    if (e.name == "lm_head.weight") e.data = other_head.data();
  expect_error("untied.safetensors", untied,
               "tensor 'lm_head.weight' differs from 'transformer.wte.weight' (model gpt2-tiny ties them");
  expect_error("missing.safetensors",
               entries_of(f, [](std::string n) { return n == "transformer.ln_f.bias" ? "" : n; }),
               "missing tensor 'transformer.ln_f.bias' that model gpt2-tiny needs");
  // A Linear's [out, in] where Conv1D's [in, out] belongs.
  auto linear = entries_of(f, [](std::string n) { return n; });
  for (auto& e : linear)
    if (e.name == "transformer.h.0.attn.c_attn.weight") e.shape = Shape{3 * kC, kC};
  expect_error("linear.safetensors", linear,
               "tensor 'transformer.h.0.attn.c_attn.weight' has shape [96, 32], model gpt2-tiny expects [32, 96]");
  auto padded = entries_of(f, [](std::string n) { return n; });
  std::vector<float> rows(128 * kC);
  padded[0] = {"transformer.wte.weight", DType::F32, Shape{128, kC}, rows.data()};
  expect_error("padded.safetensors", padded,
               "tensor 'transformer.wte.weight' has shape [128, 32], model gpt2-tiny expects [100, 32]");
  auto third_block = lm;
  third_block.push_back({"transformer.h.2.attn.bias", DType::U8, Shape{1, 1, 256, 256}, mask.data()});
  expect_error("third.safetensors", third_block, "tensor 'transformer.h.2.attn.bias' is not a parameter of model gpt2-tiny");
  // lockstep's internal names are not a GPT-2 weights file.
  std::vector<SafetensorsEntry> internal;
  for (const auto& p : a->params().params()) internal.push_back({p.name, DType::F32, p.shape, p.value.raw_data()});
  expect_error("internal.safetensors", internal, "missing tensor 'transformer.wte.weight' that model gpt2-tiny needs");
}
