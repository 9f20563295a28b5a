// Token shards as datasets: both splits of a directory, or random tokens.
#include "data/token_dataset.h"

#include "core/error.h"
#include "core/hash.h"
#include "core/input_subject.h"
#include "core/rng.h"

namespace lockstep {

TokenDataset::TokenDataset(std::string name, TokenWindows windows, int64_t vocab)
    : name_(std::move(name)), windows_(std::move(windows)), vocab_(vocab) {
  LS_CHECK(vocab >= 1, "{}: vocabulary of {}", name_, vocab);
}

void TokenDataset::fill(std::span<const int64_t> indices, void* inputs, int32_t* labels) const {
  auto* tokens = static_cast<int32_t*>(inputs);
  const int64_t t = windows_.seq_len();
  for (size_t k = 0; k < indices.size(); ++k) {
    LS_CHECK(indices[k] >= 0 && indices[k] < size(), "{}: sample index {} outside [0, {})", name_, indices[k], size());
    windows_.window(indices[k], tokens + static_cast<int64_t>(k) * t, labels + static_cast<int64_t>(k) * t);
  }
}

TokenSplits load_token_shards(const std::string& dir, int64_t seq_len, int64_t vocab) {
  auto split = [&](const std::string& which) {
    std::vector<std::vector<uint16_t>> shards;
    for (const std::string& path : find_token_shards(dir, which)) shards.push_back(read_token_shard(path, vocab));
    TokenWindows w(std::move(shards), seq_len);
    LS_CHECK_INPUT_ON(w.size() > 0, subject::kDataDirectory,
                      " {}: the {} shards hold {} tokens, no window of {} (the sequence length + 1)", dir, which,
                      w.tokens(), seq_len + 1);
    return std::make_unique<TokenDataset>(which, std::move(w), vocab);
  };
  TokenSplits s;
  s.train = split("train");
  s.val = split("val");
  return s;
}

std::unique_ptr<TokenDataset> random_tokens(std::string name, int64_t windows, int64_t seq_len, int64_t vocab,
                                            uint64_t seed) {
  LS_CHECK(vocab >= 1 && vocab <= 65536, "random tokens: vocabulary of {} (uint16 tokens)", vocab);
  std::vector<uint16_t> tokens(static_cast<size_t>(windows * seq_len + 1));
  const uint64_t key = rng_key(seed, fnv1a(name));
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<uint16_t>(rng_u64(key, i) % static_cast<uint64_t>(vocab));
  std::vector<std::vector<uint16_t>> shards;
  shards.push_back(std::move(tokens));
  return std::make_unique<TokenDataset>(std::move(name), TokenWindows(std::move(shards), seq_len), vocab);
}

}  // namespace lockstep
