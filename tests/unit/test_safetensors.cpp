// safetensors writer/reader and model weights I/O on generated files,
// including damaged and hostile ones.
#include <catch2/catch.hpp>

#include <cstring>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "checkpoint/weights.h"
#include "registry.h"
#include "temp_dir.h"

using namespace lockstep;
using lockstep::testing::read_bytes;
using lockstep::testing::TempDir;
using lockstep::testing::write_bytes;

namespace {

// A file with the given header text and `data_bytes` zero bytes of data.
std::vector<uint8_t> file_with_header(const std::string& header, size_t data_bytes, uint64_t declared_len = 0) {
  const uint64_t len = declared_len ? declared_len : header.size();
  std::vector<uint8_t> b;
  b.reserve(8 + header.size() + data_bytes);
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(len >> (8 * i)));
  for (char c : header) b.push_back(static_cast<uint8_t>(c));
  b.resize(b.size() + data_bytes, 0);
  return b;
}

std::string read_error(const std::string& path) {
  try {
    SafetensorsFile::read(path);
  } catch (const InputError& e) {
    return e.message();
  }
  return "no error";
}

}  // namespace

TEST_CASE("safetensors round-trip with metadata and several dtypes", "[safetensors]") {
  TempDir dir;
  const std::vector<float> a{1.5f, -2.f, 3.25f, 4.f, 5.f, 6.f};
  const std::vector<int32_t> b{7, -8, 9};
  const std::vector<uint8_t> c{};
  write_safetensors(dir.file("x.safetensors"),
                    {{"a", DType::F32, Shape{2, 3}, a.data()}, {"b", DType::I32, Shape{3}, b.data()},
                     {"empty", DType::U8, Shape{0}, c.data()}},
                    {{"k", "v"}});
  const auto f = SafetensorsFile::read(dir.file("x.safetensors"));
  CHECK(f.metadata().at("k") == "v");
  CHECK(f.names() == std::vector<std::string>{"a", "b", "empty"});
  const auto& ea = f.entry("a");
  CHECK(ea.shape == (Shape{2, 3}));
  CHECK(std::memcmp(ea.data, a.data(), 24) == 0);
  CHECK(std::memcmp(f.entry("b").data, b.data(), 12) == 0);
  CHECK_THROWS_AS(f.entry("zzz"), InputError);
  // Header is 8-byte aligned and the layout follows the spec literally.
  const auto bytes = read_bytes(dir.file("x.safetensors"));
  uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= static_cast<uint64_t>(bytes[static_cast<size_t>(i)]) << (8 * i);
  CHECK(hlen % 8 == 0);
  CHECK(bytes.size() == 8 + hlen + 24 + 12);
  const auto header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(hlen));
  CHECK(header["a"]["dtype"] == "F32");
  CHECK(header["b"]["data_offsets"] == nlohmann::json::array({24, 36}));
  // No temporary files are left behind.
  CHECK(dir.entries() == std::vector<std::string>{"x.safetensors"});
}

TEST_CASE("damaged safetensors files are clear input errors", "[safetensors]") {
  TempDir dir;
  const std::string ok_entry = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  struct Case {
    const char* name;
    std::vector<uint8_t> bytes;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"short", {1, 2, 3}, "shorter than the 8-byte header length"},
      {"huge-header", file_with_header("{}", 0, uint64_t{1} << 40), "larger than the 100000000 byte limit"},
      {"past-eof", file_with_header("{}", 0, 64), "runs past the end of the file"},
      {"not-json", file_with_header("{not json", 0), "header is not a JSON object"},
      {"array", file_with_header("[1,2]", 0), "header is not a JSON object"},
      {"no-offsets", file_with_header(R"({"t":{"dtype":"F32","shape":[2]}})", 8), "lacks dtype, shape or data_offsets"},
      {"bad-dtype", file_with_header(R"({"t":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", 8),
       "unsupported dtype"},
      {"neg-shape", file_with_header(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
       "invalid shape"},
      {"size-mismatch", file_with_header(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
       "data_offsets span 8 bytes"},
      {"out-of-range", file_with_header(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 8),
       "outside the 8 data bytes"},
      {"reversed", file_with_header(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
       "outside the 8 data bytes"},
      {"overlap",
       file_with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                        8),
       "overlaps"},
      {"hole", file_with_header(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8), "leaves a hole"},
      {"trailing", file_with_header("{" + ok_entry + "}", 12), "12 data bytes but tensors cover 8"},
      {"bad-metadata", file_with_header(R"({"__metadata__":{"k":3}})", 0), "metadata value of 'k' is not a string"},
      {"huge-shape", file_with_header(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}})", 8),
       "larger than the file"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    const std::string p = dir.file(c.name);
    write_bytes(p, c.bytes);
    const std::string msg = read_error(p);
    CHECK(msg.find(c.expect) != std::string::npos);
    CHECK(msg.rfind(p, 0) == 0);
  }
  CHECK(read_error(dir.file("missing")).find("no such file") != std::string::npos);
}

TEST_CASE("safetensors BOOL tensors read as U8", "[safetensors]") {
  TempDir dir;
  write_bytes(dir.file("bool.safetensors"),
              file_with_header(R"({"mask":{"dtype":"BOOL","shape":[2,2],"data_offsets":[0,4]}})", 4));
  const auto f = SafetensorsFile::read(dir.file("bool.safetensors"));
  CHECK(f.entry("mask").dtype == DType::U8);
  CHECK(f.entry("mask").shape == (Shape{2, 2}));
}

TEST_CASE("model weights round-trip and reject mismatches without touching the model", "[safetensors]") {
  TempDir dir;
  auto a = models::build_model("lenet", {}, 1);
  auto b = models::build_model("lenet", {}, 2);
  save_weights(dir.file("w.safetensors"), *a);
  load_weights(dir.file("w.safetensors"), *b);
  CHECK(a->params().values().to_vector() == b->params().values().to_vector());

  auto expect_error = [&](const std::string& path, const std::string& text) {
    auto m = models::build_model("lenet", {}, 3);
    const auto before = m->params().values().to_vector();
    try {
      load_weights(path, *m);
      FAIL("loaded " << path);
    } catch (const InputError& e) {
      INFO(e.message());
      CHECK(std::string(e.message()).find(text) != std::string::npos);
    }
    CHECK(m->params().values().to_vector() == before);
  };
  auto mlp = models::build_model("mlp", {}, 1);
  save_weights(dir.file("mlp.safetensors"), *mlp);
  expect_error(dir.file("mlp.safetensors"), "missing tensor 'layers.0.weight'");

  // Same names, a wrong shape.
  auto wide = models::build_model("lenet", {Shape{1, 28, 28}, 12}, 1);
  save_weights(dir.file("wide.safetensors"), *wide);
  expect_error(dir.file("wide.safetensors"), "tensor 'layers.9.weight' has shape [12, 128], model lenet expects [10, 128]");

  // Right shapes, wrong dtype; and an extra tensor.
  std::vector<SafetensorsEntry> entries;
  std::vector<std::vector<int32_t>> ints;
  for (const auto& p : a->params().params()) entries.push_back({p.name, DType::F32, p.shape, p.value.raw_data()});
  const float extra = 1.f;
  auto with_extra = entries;
  with_extra.push_back({"layers.99.weight", DType::F32, Shape{1}, &extra});
  write_safetensors(dir.file("extra.safetensors"), with_extra);
  expect_error(dir.file("extra.safetensors"), "tensor 'layers.99.weight' is not a parameter of model lenet");
  auto as_int = entries;
  as_int[0].dtype = DType::I32;
  write_safetensors(dir.file("int.safetensors"), as_int);
  expect_error(dir.file("int.safetensors"), "tensor 'layers.0.weight' is I32, expected F32");

  // Truncated and bit-flipped files.
  auto bytes = read_bytes(dir.file("w.safetensors"));
  auto cut = bytes;
  cut.resize(bytes.size() - 100);
  write_bytes(dir.file("cut.safetensors"), cut);
  expect_error(dir.file("cut.safetensors"), "outside the");
  auto flipped = bytes;
  flipped[9] ^= 0x40;  // inside the JSON header
  write_bytes(dir.file("flip.safetensors"), flipped);
  expect_error(dir.file("flip.safetensors"), dir.file("flip.safetensors"));
  // A bit flipped in tensor data still parses: the stored CRC-32 finds it.
  auto flipped_data = bytes;
  flipped_data[bytes.size() - 3] ^= 0x10;
  write_bytes(dir.file("flip-data.safetensors"), flipped_data);
  expect_error(dir.file("flip-data.safetensors"), "fails its checksum (the file is damaged)");

  // Weights from other tools carry no checksums and still load.
  write_safetensors(dir.file("plain.safetensors"), entries);
  auto c = models::build_model("lenet", {}, 4);
  load_weights(dir.file("plain.safetensors"), *c);
  CHECK(c->params().values().to_vector() == a->params().values().to_vector());
}

TEST_CASE("a failed write leaves the existing file untouched and no temporary behind", "[safetensors]") {
  TempDir dir;
  const std::string p = dir.file("w.safetensors");
  const float one = 1.f;
  write_safetensors(p, {{"a", DType::F32, Shape{1}, &one}});
  const auto before = read_bytes(p);
  // A duplicate name is rejected before anything is written.
  CHECK_THROWS(write_safetensors(p, {{"a", DType::F32, Shape{1}, &one}, {"a", DType::F32, Shape{1}, &one}}));
  CHECK(read_bytes(p) == before);
  CHECK_THROWS_AS(write_safetensors(dir.file("no/such/dir/w.safetensors"), {{"a", DType::F32, Shape{1}, &one}}),
                  InputError);
  CHECK(dir.entries() == std::vector<std::string>{"w.safetensors"});
}

// Found by review while fuzzing (tests/fuzz/): too large to keep in the fuzz corpus.
TEST_CASE("a shape nested a million arrays deep is an input error, not a stack overflow", "[safetensors]") {
  TempDir dir;
  const size_t depth = 1'000'000;
  const std::string header = R"({"t":{"dtype":"F32","shape":)" + std::string(depth, '[') + std::string(depth, ']') +
                             R"(,"data_offsets":[0,0]}})";
  write_bytes(dir.file("deep.safetensors"), file_with_header(header, 0));
  const std::string msg = read_error(dir.file("deep.safetensors"));
  CHECK(msg.find("invalid shape [nested arrays]") != std::string::npos);
  CHECK(msg.size() < 200);
}
