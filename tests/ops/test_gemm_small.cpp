// sgemm_small (ops/gemm/gemm_small_cpu.cpp) against a double-precision product.
// Both paths are checked on every shape: the register-blocked kernel
// (sgemm_small_kernel, forced) and sgemm_small's own choice (the kernel or
// OpenBLAS). Shapes cover every row remainder of the 6-row micro-tile, 8- and
// 16-column panels, K = 0, K across several 64-blocks, leading dimensions
// larger than the matrix, A and A^T, and clear against accumulate.
// Tolerance: |got - want| <= 1e-5 * sum_k |a_ik b_kj| (fp32 rounding of a sum
// of K products, any order); an indexing error is O(1).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "ops/gemm/gemm.h"

using namespace lockstep;
using namespace lockstep::ops;

namespace {

struct Problem {
  Trans ta;
  int64_t M, N, K, lda, ldb, ldc;
  std::vector<float> A, B, C0;
};

Problem make(Trans ta, int64_t M, int64_t N, int64_t K, int64_t pad, Rng& rng) {
  Problem p{ta, M, N, K, (ta == Trans::N ? K : M) + pad, N + pad, N + pad, {}, {}, {}};
  p.A.resize(static_cast<size_t>((ta == Trans::N ? M : K) * p.lda + 1));
  p.B.resize(static_cast<size_t>(K * p.ldb + 1));
  p.C0.resize(static_cast<size_t>(M * p.ldc + 1));
  for (float& v : p.A) v = rng.normal();
  for (float& v : p.B) v = rng.normal();
  for (float& v : p.C0) v = rng.normal();
  return p;
}

// Checks C (from C0, cleared or accumulated) and that nothing outside the M x N block moved.
void check(const Problem& p, const std::vector<float>& C, bool accumulate) {
  double worst = 0;
  for (int64_t i = 0; i < p.M; ++i)
    for (int64_t j = 0; j < p.N; ++j) {
      double want = accumulate ? p.C0[i * p.ldc + j] : 0.0, mag = std::abs(want);
      for (int64_t k = 0; k < p.K; ++k) {
        const double a = p.ta == Trans::N ? p.A[i * p.lda + k] : p.A[k * p.lda + i];
        want += a * p.B[k * p.ldb + j];
        mag += std::abs(a * p.B[k * p.ldb + j]);
      }
      worst = std::max(worst, std::abs(C[i * p.ldc + j] - want) / std::max(mag, 1.0));
    }
  CHECK(worst <= 1e-5);
  size_t outside_changed = 0;
  for (size_t e = 0; e < C.size(); ++e) {
    const int64_t i = static_cast<int64_t>(e) / p.ldc, j = static_cast<int64_t>(e) % p.ldc;
    if ((i >= p.M || j >= p.N) && C[e] != p.C0[e]) ++outside_changed;
  }
  CHECK(outside_changed == 0);
}

}  // namespace

TEST_CASE("sgemm_small matches a double-precision product, kernel and chosen path", "[gemm]") {
  Rng rng(5);
  for (Trans ta : {Trans::N, Trans::T})
    for (int64_t M : {1, 5, 6, 7, 13, 40})
      for (int64_t N : {8, 16, 24, 40})
        for (int64_t K : {0, 1, 16, 63, 64, 65, 200})
          for (int64_t pad : {0, 3})
            for (bool accumulate : {false, true}) {
              INFO((ta == Trans::N ? "A" : "A^T") << " M=" << M << " N=" << N << " K=" << K << " pad=" << pad
                                                  << " accumulate=" << accumulate);
              const Problem p = make(ta, M, N, K, pad, rng);
              std::vector<float> C = p.C0;
              sgemm_small_kernel(ta, M, N, K, p.A.data(), p.lda, p.B.data(), p.ldb, C.data(), p.ldc, accumulate);
              check(p, C, accumulate);
              C = p.C0;
              sgemm_small(ta, M, N, K, p.A.data(), p.lda, p.B.data(), p.ldb, C.data(), p.ldc, accumulate);
              check(p, C, accumulate);
            }
}

TEST_CASE("sgemm_small hands large or unaligned shapes to OpenBLAS", "[gemm]") {
  CHECK_FALSE(sgemm_small_uses_kernel(Trans::N, 512, 12, 16));   // N not a multiple of 8
  CHECK_FALSE(sgemm_small_uses_kernel(Trans::N, 512, 256, 64));  // N past 128
  CHECK_FALSE(sgemm_small_uses_kernel(Trans::N, 512, 64, 256));  // K past 128
  CHECK_FALSE(sgemm_small_uses_kernel(Trans::T, 128, 64, 512));  // A^T, M past 64
  CHECK_FALSE(sgemm_small_uses_kernel(Trans::T, 64, 128, 512));  // A^T, N past 64
  if (sgemm_small_kernel_available()) {
    CHECK(sgemm_small_uses_kernel(Trans::N, 512, 16, 16));
    CHECK(sgemm_small_uses_kernel(Trans::T, 16, 64, 4096));
  }
}
