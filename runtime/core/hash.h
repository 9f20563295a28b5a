// Stable hashes (identical on every compiler and rank): FNV-1a over bytes,
// used to derive RNG streams from names and to fingerprint configurations.
#pragma once

#include <cstdint>
#include <string_view>

namespace lockstep {

constexpr uint64_t fnv1a(std::string_view s, uint64_t h = 0xcbf29ce484222325ull) {
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace lockstep
