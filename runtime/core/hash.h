// Stable hashes (identical on every compiler and rank): FNV-1a over bytes,
// used to derive RNG streams from names and to fingerprint configurations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace lockstep {

constexpr uint64_t fnv1a(std::string_view s, uint64_t h = 0xcbf29ce484222325ull) {
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// A checksum of a large buffer (every parameter of a model), 8 bytes at a
// time: a few GB/s, where byte-wise FNV-1a manages a few hundred MB/s. Any
// changed bit changes it with overwhelming probability; not cryptographic.
inline uint64_t hash_bytes(const void* data, size_t n, uint64_t h = 0x9e3779b97f4a7c15ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h ^ (h >> 32);
}

}  // namespace lockstep
