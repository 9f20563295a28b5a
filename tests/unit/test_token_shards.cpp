// data/token_shards.h: llm.c's token shard format, its damaged forms as input
// errors naming the file, and the (T + 1)-token windows over the shards.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <numeric>

#include "core/error.h"
#include "data/loader.h"
#include "data/token_dataset.h"
#include "data/token_shards.h"
#include "temp_dir.h"

using namespace lockstep;
using lockstep::testing::TempDir;

namespace {

std::vector<uint16_t> iota_tokens(size_t n, uint16_t first = 0) {
  std::vector<uint16_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::string read_error(const std::string& path, int64_t vocab = 50257) {
  try {
    read_token_shard(path, vocab);
  } catch (const InputError& e) {
    return e.message();
  }
  return "";
}

// Rewrites one int32 of the header.
void patch_header(const std::string& path, int index, int32_t value) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(4 * index);
  f.write(reinterpret_cast<const char*>(&value), 4);
}

}  // namespace

TEST_CASE("token shards: llm.c's header and uint16 tokens round-trip", "[tokens]") {
  TempDir d;
  const std::string p = d.file("tiny_train_000.bin");
  const std::vector<uint16_t> t{50256, 464, 2068, 7586, 21831, 0, 50256};
  write_token_shard(p, t);
  CHECK(read_token_shard(p, 50257) == t);
  // The layout byte by byte: 1024 header bytes, then two bytes per token.
  std::ifstream f(p, std::ios::binary | std::ios::ate);
  CHECK(static_cast<int64_t>(f.tellg()) == 1024 + 2 * 7);
  f.seekg(0);
  int32_t h[3];
  f.read(reinterpret_cast<char*>(h), sizeof h);
  CHECK(h[0] == 20240520);
  CHECK(h[1] == 1);
  CHECK(h[2] == 7);
}

TEST_CASE("token shards: damaged files are input errors naming the file", "[tokens]") {
  TempDir d;
  const std::string p = d.file("x_train.bin");
  write_token_shard(p, iota_tokens(100));

  // A header field rewritten, and the message that names it.
  const struct {
    int field;
    int32_t value;
    std::string message;
  } patches[] = {
      {0, 12345, ": not a token shard (magic 12345, expected 20240520)"},
      {1, 2, ": token shard version 2 (this reader knows version 1)"},
      {2, 101, ": the header counts 101 tokens, the file holds 100 (truncated)"},
      {2, 99, ": 2 bytes after the 99 tokens the header counts"},
  };
  for (const auto& c : patches) {
    patch_header(p, c.field, c.value);
    CHECK(read_error(p) == p + c.message);
    write_token_shard(p, iota_tokens(100));
  }
  SECTION("a token outside the vocabulary") {
    CHECK(read_error(p, 50) == p + ": token 50 at position 50 is outside the vocabulary of 50");
  }
  SECTION("shorter than the header") {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << "abc";
    CHECK(read_error(p) == p + ": 3 bytes, shorter than a token shard's 1024-byte header");
  }
  SECTION("missing") {
    CHECK(read_error(d.file("nope.bin")).rfind(d.file("nope.bin") + ": cannot read its size", 0) == 0);
  }
}

TEST_CASE("token shards: a split's files are found by name and sorted, and none is an input error", "[tokens]") {
  TempDir d;
  for (const char* n : {"fw_train_000002.bin", "fw_val_000000.bin", "fw_train_000001.bin", "notes.txt"})
    write_token_shard(d.file(n), iota_tokens(10));
  CHECK(find_token_shards(d.path().string(), "train") ==
        std::vector<std::string>{d.file("fw_train_000001.bin"), d.file("fw_train_000002.bin")});
  CHECK(find_token_shards(d.path().string(), "val") == std::vector<std::string>{d.file("fw_val_000000.bin")});
  TempDir empty;
  try {
    find_token_shards(empty.path().string(), "train");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.subject() == "data directory");
    CHECK(e.message() == "data directory " + empty.path().string() +
                             ": no token shards for the train split (files named *train*.bin in llm.c's format)");
  }
}

TEST_CASE("token windows: T+1 tokens every T within a shard, never across shards", "[tokens]") {
  // Shards of 10, 3 and 9 tokens at T = 4: (10-1)/4 = 2 windows, none (3 <= T), (9-1)/4 = 2.
  std::vector<std::vector<uint16_t>> shards{iota_tokens(10, 0), iota_tokens(3, 100), iota_tokens(9, 200)};
  const TokenWindows w(shards, 4);
  CHECK(w.size() == 4);
  CHECK(w.tokens() == 22);
  std::vector<int32_t> in(4), out(4);
  w.window(0, in.data(), out.data());
  CHECK(in == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(out == std::vector<int32_t>{1, 2, 3, 4});
  w.window(1, in.data(), out.data());
  CHECK(in == std::vector<int32_t>{4, 5, 6, 7});
  CHECK(out == std::vector<int32_t>{5, 6, 7, 8});
  w.window(2, in.data(), out.data());  // the third shard's first: the 3-token shard has none
  CHECK(in == std::vector<int32_t>{200, 201, 202, 203});
  CHECK(out == std::vector<int32_t>{201, 202, 203, 204});
  w.window(3, in.data(), out.data());
  CHECK(in == std::vector<int32_t>{204, 205, 206, 207});
  CHECK(out == std::vector<int32_t>{205, 206, 207, 208});
  CHECK_THROWS_AS(w.window(4, in.data(), out.data()), Error);
}

TEST_CASE("token datasets: both splits through the prefetch loader as int32 windows and [n, T] targets", "[tokens]") {
  TempDir d;
  write_token_shard(d.file("x_train_000.bin"), iota_tokens(41));  // (41-1)/8 = 5 windows of T = 8
  write_token_shard(d.file("x_val_000.bin"), iota_tokens(17, 1000));
  TokenSplits s = load_token_shards(d.path().string(), 8, 2000);
  CHECK(s.train->size() == 5);
  CHECK(s.val->size() == 2);
  CHECK(s.train->sample_shape() == Shape{8});
  CHECK(s.train->input_dtype() == DType::I32);
  CHECK(s.train->targets_per_sample() == 8);
  CHECK(s.train->num_classes() == 2000);
  PrefetchLoader loader(*s.train, 4, 2, cpu_allocator(), 2);  // two workers: each assembles part of a batch
  loader.begin(1, [](int64_t, std::vector<int64_t>& out) { out = {4, 0, 2}; });
  const Batch& b = loader.next();
  REQUIRE(b.inputs.shape() == (Shape{3, 8}));
  REQUIRE(b.labels.shape() == (Shape{3, 8}));
  CHECK(b.size() == 3);
  const int32_t* in = b.inputs.data<int32_t>();
  const int32_t* tg = b.labels.data<int32_t>();
  for (int k = 0; k < 3; ++k) {
    const int window = std::vector<int>{4, 0, 2}[static_cast<size_t>(k)];
    for (int j = 0; j < 8; ++j) {
      CHECK(in[k * 8 + j] == window * 8 + j);
      CHECK(tg[k * 8 + j] == window * 8 + j + 1);
    }
  }
  // A vocabulary the tokens exceed, and a split too short for one window.
  CHECK_THROWS_WITH(load_token_shards(d.path().string(), 8, 1000), Catch::Contains("outside the vocabulary of 1000"));
  CHECK_THROWS_WITH(load_token_shards(d.path().string(), 17, 2000),
                    Catch::Contains("the val shards hold 17 tokens, no window of 18"));
}
