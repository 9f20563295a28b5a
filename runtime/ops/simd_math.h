// Vector exp on 8 floats (ops/simd.h's f8), for the CPU kernels whose
// cost is a transcendental per element: softmax over a 50,304-wide vocabulary,
// attention's softmax, GELU. Inlined into LS_SIMD_CLONES loops they compile to
// AVX2/FMA (or AVX-512) in the vector clones and to SSE in the baseline one;
// libm's scalar expf never vectorises.
//   exp8   Cephes' expf: x = n ln2 + r with |r| <= ln2/2, a degree-5 polynomial
//          for e^r, 2^n built in the exponent bits. Within 2 ulp of expf over
//          [-87, 88]; below -87 it returns 0 (where expf's results near
//          the denormals, slow to compute with), above 88 e^88 (no inf). NaN in,
//          NaN out.
//   max8, hmax8, hsum8: lane-wise max, horizontal max and sum.
//   row_max8 the largest of p[0, n), n >= 1 (8 lanes, then the tail).
#pragma once

#include <cstdint>

#include "ops/simd.h"

namespace lockstep::ops {

LS_INLINE f8 max8(f8 a, f8 b) { return a > b ? a : b; }

LS_INLINE float hmax8(f8 v) {
  float m = v[0];
  for (int k = 1; k < 8; ++k) m = v[k] > m ? v[k] : m;
  return m;
}

LS_INLINE float row_max8(const float* p, int64_t n) {
  float mx = p[0];
  int64_t j = 0;
  if (n >= 8) {
    f8 m = load8(p);
    for (j = 8; j + 8 <= n; j += 8) m = max8(m, load8(p + j));
    mx = hmax8(m);
  }
  for (; j < n; ++j) mx = p[j] > mx ? p[j] : mx;
  return mx;
}

LS_INLINE float hsum8(f8 v) { return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])); }

LS_INLINE f8 exp8(f8 x) {
  // Clamp by comparisons that are false for NaN, so NaN passes through.
  const f8 lo = splat8(-87.f);
  const auto underflow = x < lo;
  x = x > splat8(88.f) ? splat8(88.f) : x;
  x = underflow ? lo : x;
  // n = round(x / ln2), by the add-and-subtract of 1.5 * 2^23.
  const f8 magic = splat8(12582912.f);
  const f8 n = (x * splat8(1.44269504088896341f) + magic) - magic;
  // r = x - n ln2, ln2 split in two so the product is exact enough.
  f8 r = x - n * splat8(0.693359375f);
  r = r - n * splat8(-2.12194440e-4f);
  const f8 r2 = r * r;
  f8 p = splat8(1.9875691500e-4f);
  p = p * r + splat8(1.3981999507e-3f);
  p = p * r + splat8(8.3334519073e-3f);
  p = p * r + splat8(4.1665795894e-2f);
  p = p * r + splat8(1.6666665459e-1f);
  p = p * r + splat8(5.0000001201e-1f);
  p = p * r2 + r + splat8(1.f);
  // 2^n: n + 127 in the exponent field. n is an integer in [-126, 127]; a
  // NaN lane converts as 0 (converting NaN itself is undefined), and p (NaN)
  // carries the NaN through the product.
  typedef int32_t i32x8 __attribute__((vector_size(32)));
  const f8 n_int = n == n ? n : splat8(0.f);
  const i32x8 e = (__builtin_convertvector(n_int, i32x8) + 127) << 23;
  f8 scale;
  __builtin_memcpy(&scale, &e, sizeof scale);
  return underflow ? splat8(0.f) : p * scale;
}

}  // namespace lockstep::ops
