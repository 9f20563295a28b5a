// Gradient clipping on the host: the fixed-order sum of squares.
#include "optim/grad_clip.h"

#include <vector>

#include "ops/simd.h"

namespace lockstep {
namespace {

constexpr int64_t kBlock = int64_t{1} << 16;

LS_SIMD_CLONES double block_sum_of_squares(const float* g, int64_t n) {
  double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) {
      const double v = g[i + j];
      lane[j] += v * v;
    }
  for (; i < n; ++i) {
    const double v = g[i];
    lane[i % 8] += v * v;
  }
  double s = 0;
  for (int j = 0; j < 8; ++j) s += lane[j];
  return s;
}

}  // namespace

double sum_of_squares_cpu(const float* g, int64_t n) {
  if (n <= 0) return 0;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> sums(static_cast<size_t>(blocks));
  ops::parallel_for(blocks, 4, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      sums[static_cast<size_t>(b)] = block_sum_of_squares(g + b * kBlock, std::min(kBlock, n - b * kBlock));
  });
  double s = 0;
  for (double v : sums) s += v;
  return s;
}

}  // namespace lockstep
