// NCHW <-> NHWC transposes on the CPU: per item, a [c, hw] <-> [hw, c] matrix
// transpose in 32x32 tiles (both sides touched a cache line at a time); items
// are split across threads.
#include <algorithm>

#include "ops/layout/layout_cpu.h"
#include "ops/simd.h"

namespace lockstep::ops {
namespace {

constexpr int64_t kTile = 32;

// dst[j, i] = src[i, j] for src [rows, cols].
void transpose(int64_t rows, int64_t cols, const float* src, float* dst) {
  for (int64_t i0 = 0; i0 < rows; i0 += kTile)
    for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const int64_t i1 = std::min(rows, i0 + kTile), j1 = std::min(cols, j0 + kTile);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) dst[j * rows + i] = src[i * cols + j];
    }
}

void batched(int64_t n, int64_t rows, int64_t cols, const float* src, float* dst) {
  const int64_t item = rows * cols;
  if (item == 0) return;
  parallel_for(n, std::max<int64_t>(1, (int64_t{1} << 16) / item), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) transpose(rows, cols, src + i * item, dst + i * item);
  });
}

}  // namespace

void nchw_to_nhwc_cpu(int64_t n, int64_t c, int64_t hw, const float* src, float* dst) { batched(n, c, hw, src, dst); }
void nhwc_to_nchw_cpu(int64_t n, int64_t c, int64_t hw, const float* src, float* dst) { batched(n, hw, c, src, dst); }

}  // namespace lockstep::ops
