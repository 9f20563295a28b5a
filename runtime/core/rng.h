// Deterministic, counter-based random numbers. Every draw is a pure function of
// (seed, stream, counter), so results do not depend on thread count, world size
// or how far a previous run got: resuming or resharding reproduces the same draws.
#pragma once

#include <cstdint>

namespace lockstep {

// SplitMix64 finaliser: a strong 64-bit mixing function.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Key for a stream of draws: hash of seed and up to three stream identifiers.
constexpr uint64_t rng_key(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  return mix64(mix64(mix64(mix64(seed) ^ a) ^ b) ^ c);
}

// The i-th 64-bit draw of stream `key` (SplitMix64: the mixed i-th point of a
// Weyl sequence starting at key; mix64 adds the increment).
constexpr uint64_t rng_u64(uint64_t key, uint64_t i) { return mix64(key + i * 0x9E3779B97F4A7C15ull); }

// Uniform float in [0, 1) from the top 24 bits of a draw. Converted through
// int32 (the value is below 2^24, so the same float): a conversion vector
// units have, so loops over draws vectorise.
constexpr float u64_to_unit_float(uint64_t x) {
  return static_cast<float>(static_cast<int32_t>(x >> 40)) * (1.0f / 16777216.0f);
}

// Sequential generator over one stream (for initialisation and shuffles).
class Rng {
 public:
  explicit Rng(uint64_t key) : key_(key) {}
  uint64_t next_u64() { return rng_u64(key_, counter_++); }
  float uniform() { return u64_to_unit_float(next_u64()); }  // [0, 1)
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Unbiased integer in [0, n) by rejection (Lemire's method).
  uint64_t below(uint64_t n);
  float normal();  // standard normal, Box-Muller
  uint64_t counter() const { return counter_; }

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
};

}  // namespace lockstep
