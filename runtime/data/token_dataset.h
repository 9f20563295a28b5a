// TokenDataset: llm.c token shards (data/token_shards.h) as the loader's
// samples. Sample i is window i of the split's TokenWindows:
//   inputs [T] int32 (tokens t..t+T-1)   targets [T] int32 (tokens t+1..t+T)
// so a global batch holds the same windows at any world size (the samplers
// shuffle and shard window indices, as they do images). The validation split
// is fixed windows, sharded over ranks by the evaluation sampler.
#pragma once

#include <memory>
#include <string>

#include "data/dataset.h"
#include "data/token_shards.h"

namespace lockstep {

class TokenDataset final : public Dataset {
 public:
  // `vocab`: every token is below it (checked as the shards are read).
  TokenDataset(std::string name, TokenWindows windows, int64_t vocab);
  std::string name() const override { return name_; }
  int64_t size() const override { return windows_.size(); }
  Shape sample_shape() const override { return Shape{windows_.seq_len()}; }
  int64_t num_classes() const override { return vocab_; }
  DType input_dtype() const override { return DType::I32; }
  int64_t targets_per_sample() const override { return windows_.seq_len(); }
  void fill(std::span<const int64_t> indices, void* inputs, int32_t* labels) const override;
  int64_t tokens() const { return windows_.tokens(); }  // in every shard, windowed or not

 private:
  std::string name_;
  TokenWindows windows_;
  int64_t vocab_;
};

struct TokenSplits {
  std::unique_ptr<TokenDataset> train, val;
};

// `dir`'s *train*.bin and *val*.bin shards as (seq_len + 1)-token windows.
// Input errors name the directory or the shard: no shards, a damaged shard,
// a token >= `vocab`, a split too short for one window of seq_len + 1 tokens.
TokenSplits load_token_shards(const std::string& dir, int64_t seq_len, int64_t vocab);

// `windows` windows of tokens drawn uniformly from [0, vocab) by `seed`
// (throughput benchmarks: nothing to learn, the same on every rank).
std::unique_ptr<TokenDataset> random_tokens(std::string name, int64_t windows, int64_t seq_len, int64_t vocab,
                                            uint64_t seed);

}  // namespace lockstep
