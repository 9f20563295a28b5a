// The dropout mask's hash, shared by the CPU kernel (ops/elementwise/elementwise_cpu.cpp)
// and the GPU kernel (ops/elementwise/elementwise_cuda.cu) so both draw bit-identical masks.
//   row key:  the low 32 bits of draw `row0 + r` of the stream `key`
//             (= static_cast<uint32_t>(rng_u64(key, row)), core/rng.h; the CPU
//             file static_asserts the two agree)
//   keep:     element e of a row keeps when the top 24 bits of
//             mix32(row_key + e * golden32) are >= threshold = ceil(p * 2^24)
// Everything here is integer arithmetic, so host and device results are equal
// by construction. The hashing functions are host/device under nvcc and plain
// constexpr functions otherwise.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace lockstep::ops {

// SplitMix64 finaliser, the same function as lockstep::mix64 (core/rng.h),
// which is host-only.
LS_HOST_DEVICE constexpr uint64_t dropout_mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// 32-bit key of global sample row `row`: low bits of rng_u64(key, row).
LS_HOST_DEVICE constexpr uint32_t dropout_row_key(uint64_t key, uint64_t row) {
  return static_cast<uint32_t>(dropout_mix64(key + row * 0x9E3779B97F4A7C15ull));
}

// murmur3's 32-bit finaliser: cheap and vectorisable (32-bit multiplies).
LS_HOST_DEVICE constexpr uint32_t dropout_mix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

// 1 when element `e` of the row with key `row_key` is kept, else 0.
LS_HOST_DEVICE constexpr uint32_t dropout_keep(uint32_t row_key, int64_t e, uint32_t threshold) {
  const uint32_t u = dropout_mix32(row_key + static_cast<uint32_t>(e) * 0x9E3779B9u) >> 8;
  return u >= threshold ? 1u : 0u;
}

// The key of dropout stream `stream` at step `step` under `seed`: the host's
// rng_key(seed, stream, step) (core/rng.h; the CPU file static_asserts the two
// agree), computable on the device.
LS_HOST_DEVICE constexpr uint64_t dropout_stream_key(uint64_t seed, uint64_t stream, uint64_t step) {
  return dropout_mix64(dropout_mix64(dropout_mix64(dropout_mix64(seed) ^ stream) ^ step) ^ 0);
}

// A dropout key whose step is read on the device when the kernel runs (a
// captured CUDA graph replays with the step counter in device memory):
// key = dropout_stream_key(seed, stream, *step). step null: the host's key.
struct DeviceDropoutKey {
  uint64_t seed = 0, stream = 0;
  const int64_t* step = nullptr;
};

// Host side: the keep threshold ceil(p * 2^24) and the kept values' scale 1 / (1 - p).
inline uint32_t dropout_threshold(float p) {
  return static_cast<uint32_t>(std::ceil(static_cast<double>(p) * 16777216.0));
}
inline float dropout_scale(float p) { return 1.f / (1.f - p); }

}  // namespace lockstep::ops
