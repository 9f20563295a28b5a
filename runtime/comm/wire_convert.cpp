// Float <-> 16-bit wire conversions over arrays (see wire_convert.h).
#include "comm/wire_convert.h"

#include <cstring>

#include "core/error.h"
#include "ops/simd.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace lockstep {
namespace {

// The same arithmetic as float_to_bf16, inline so that the loop vectorises.
LS_SIMD_CLONES void to_bf16(const float* in, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, in + i, 4);
    const uint32_t nan = (u >> 16) | 0x40u;             // NaN stays NaN
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // nearest even
    out[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
  }
}

LS_SIMD_CLONES void from_bf16(const uint16_t* in, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(in[i]) << 16;
    std::memcpy(out + i, &u, 4);
  }
}

#if defined(__x86_64__) && !defined(__clang__)
#define LS_HAVE_F16C_PATH 1
// vcvtps2ph with imm 0 rounds to nearest even, as the IEEE conversion does.
__attribute__((target("avx,f16c"))) void to_f16_f16c(const float* in, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) out[i] = float_to_f16(in[i]);
}

__attribute__((target("avx,f16c"))) void from_f16_f16c(const uint16_t* in, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i) out[i] = f16_to_float(in[i]);
}

bool have_f16c() { return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx"); }
#endif

void to_f16(const float* in, int64_t n, uint16_t* out) {
#ifdef LS_HAVE_F16C_PATH
  if (have_f16c()) return to_f16_f16c(in, n, out);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_f16(in[i]);
}

void from_f16(const uint16_t* in, int64_t n, float* out) {
#ifdef LS_HAVE_F16C_PATH
  if (have_f16c()) return from_f16_f16c(in, n, out);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = f16_to_float(in[i]);
}

}  // namespace

void floats_to_wire(const float* in, int64_t n, WireType wire, uint16_t* out) {
  LS_CHECK(wire != WireType::F32, "floats_to_wire: F32 is not a 16-bit wire");
  if (wire == WireType::BF16)
    to_bf16(in, n, out);
  else
    to_f16(in, n, out);
}

void wire_to_floats(const uint16_t* in, int64_t n, WireType wire, float* out) {
  LS_CHECK(wire != WireType::F32, "wire_to_floats: F32 is not a 16-bit wire");
  if (wire == WireType::BF16)
    from_bf16(in, n, out);
  else
    from_f16(in, n, out);
}

}  // namespace lockstep
