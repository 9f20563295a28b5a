// llm.c's token shards: the files its data scripts write (FineWeb,
// TinyStories, tinyshakespeare) and its trainers read. A shard is a header of
// 256 little-endian int32 -- [0] magic 20240520, [1] version 1, [2] token
// count -- followed by exactly that many uint16 tokens.
//
// A directory holds a split's shards as files whose names contain "train" or
// "val" and end in ".bin", read in sorted name order. Every malformed input
// is an InputError naming the file: no shards, bad magic, wrong version, a
// count past the end of the file or short of it, a token outside the
// vocabulary.
//
// TokenWindows numbers the training samples: (T + 1)-token windows starting
// every T tokens within each shard (inputs t..t+T-1, targets t+1..t+T), as
// llm.c's loader steps through a shard, never across a shard's end. Window i
// is the same tokens at any world size; samplers shuffle and shard the
// window indices.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lockstep {

inline constexpr int32_t kTokenShardMagic = 20240520;
inline constexpr int32_t kTokenShardVersion = 1;
inline constexpr int64_t kTokenShardHeaderInts = 256;

// The shards of `split` ("train" or "val") in `dir`, sorted; an input error
// when there are none.
std::vector<std::string> find_token_shards(const std::string& dir, const std::string& split);

// One shard's tokens, every one checked to be below `vocab_size`.
std::vector<uint16_t> read_token_shard(const std::string& path, int64_t vocab_size);

// For tests and tools: writes a shard in llm.c's format.
void write_token_shard(const std::string& path, std::span<const uint16_t> tokens);

class TokenWindows {
 public:
  // The shards' tokens; `seq_len` T >= 1. Shards shorter than T + 1 tokens
  // contribute no window.
  TokenWindows(std::vector<std::vector<uint16_t>> shards, int64_t seq_len);

  int64_t size() const { return starts_.empty() ? 0 : starts_.back(); }  // windows in all shards
  int64_t seq_len() const { return seq_len_; }
  int64_t tokens() const;  // tokens in all shards
  // Window i's inputs and targets: T int32 each.
  void window(int64_t i, int32_t* inputs, int32_t* targets) const;

 private:
  std::vector<std::vector<uint16_t>> shards_;
  std::vector<int64_t> starts_;  // starts_[s + 1] - starts_[s]: shard s's windows (prefix sums)
  int64_t seq_len_;
};

}  // namespace lockstep
