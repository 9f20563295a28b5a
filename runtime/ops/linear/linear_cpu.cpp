// Linear kernels over OpenBLAS, threads over row blocks.
#include "ops/linear/linear_cpu.h"

#include <algorithm>

#include "ops/elementwise/elementwise_cpu.h"
#include "ops/gemm/gemm.h"
#include "ops/simd.h"

namespace lockstep::ops {
namespace {
// Rows per thread, at least: below this a split costs more than it gains.
constexpr int64_t kMinRows = 16;
}  // namespace

void linear_forward_cpu(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* b, float* y,
                        bool relu) {
  parallel_ranges(compute_threads(B, kMinRows), B, [&](int, int64_t r0, int64_t r1) {
    float* yr = y + r0 * out;
    if (b)
      for (int64_t i = r0; i < r1; ++i) std::copy_n(b, out, y + i * out);
    sgemm(Trans::N, Trans::T, r1 - r0, out, in, 1.f, x + r0 * in, in, w, in, b ? 1.f : 0.f, yr, out);
  });
  if (relu) relu_forward_cpu(B * out, y, y);
}

void linear_backward_cpu(int64_t B, int64_t in, int64_t out, const float* x, const float* w, const float* y,
                         float* dy, float* dx, float* dw, float* db, bool accumulate, bool relu) {
  if (relu) relu_backward_cpu(B * out, y, dy, dy);
  // dW[o0:o1, :] (+)= dy[:, o0:o1]^T x   and   db[o0:o1] (+)= sum over rows of dy[:, o0:o1]
  parallel_ranges(compute_threads(out, kMinRows), out, [&](int, int64_t o0, int64_t o1) {
    sgemm(Trans::T, Trans::N, o1 - o0, in, B, 1.f, dy + o0, out, x, in, accumulate ? 1.f : 0.f, dw + o0 * in, in);
    if (db) {
      if (!accumulate) std::fill(db + o0, db + o1, 0.f);
      for (int64_t i = 0; i < B; ++i)
        for (int64_t o = o0; o < o1; ++o) db[o] += dy[i * out + o];
    }
  });
  // dx[r0:r1, :] = dy[r0:r1, :] w
  if (dx)
    parallel_ranges(compute_threads(B, kMinRows), B, [&](int, int64_t r0, int64_t r1) {
      sgemm(Trans::N, Trans::N, r1 - r0, in, out, 1.f, dy + r0 * out, out, w, in, 0.f, dx + r0 * in, in);
    });
}

}  // namespace lockstep::ops
