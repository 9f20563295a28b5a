// Rank-ordered elementwise sums, vectorised (AVX2 clone where available).
#include "comm/ordered_sum.h"

#include "ops/simd.h"

namespace lockstep {

LS_SIMD_CLONES void sum_in_rank_order(const float* const* s, int count, int64_t n, float* out) {
  if (count == 1) {
    if (out != s[0])
      for (int64_t i = 0; i < n; ++i) out[i] = s[0][i];
    return;
  }
  if (count == 2) {
    const float* a = s[0];
    const float* b = s[1];
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    float acc = s[0][i];
    for (int r = 1; r < count; ++r) acc += s[r][i];
    out[i] = acc;
  }
}

}  // namespace lockstep
