// sgemm_small: a register-blocked GEMM kernel for small products (see gemm.h).
//
// C is computed in micro-tiles of kMR rows x 16 (or 8) columns held in
// registers: for each k, two 8-float loads of B's row k, and one broadcast of
// A(i, k) per row, feed 2 fused multiply-adds per row. 6 x 16 uses 12 of the
// 16 AVX2 registers for the sums, 2 for B and 1 for the broadcast. Nothing is
// packed: B's 16-column panel (K x 64 bytes, K <= kKC) stays in L1 while the
// row blocks of A stream past it. K is cut into blocks of kKC so that panel
// stays small when K is the long dimension (A^T with K = tiles).
// Summation order for C(i, j): k ascending, one block of kKC at a time, fixed
// by the shape alone.
#include <algorithm>

#include "core/error.h"
#include "ops/gemm/gemm.h"
#include "ops/simd.h"

namespace lockstep::ops {
namespace {

constexpr int kMR = 6;
constexpr int64_t kKC = 64;

// C[MR x 8 NV] (+)= A(i, k) * B[k][0 .. 8 NV) over k < K, A(i, k) = A[i * ars + k * acs].
template <int MR, int NV>
LS_INLINE void micro_tile(int64_t K, const float* A, int64_t ars, int64_t acs, const float* B, int64_t ldb, float* C,
                          int64_t ldc, bool accumulate) {
  f8 c[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) c[i][v] = accumulate ? load8(C + i * ldc + 8 * v) : splat8(0.f);
  for (int64_t k = 0; k < K; ++k) {
    f8 b[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) b[v] = load8(B + k * ldb + 8 * v);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      // vector * scalar: GCC broadcasts with one instruction (an f8{a, ...}
      // initialiser became a chain of inserts inside the AVX2 clone).
      const float a = A[i * ars + k * acs];
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) c[i][v] += b[v] * a;
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) store8(C + i * ldc + 8 * v, c[i][v]);
}

template <int NV>
LS_INLINE void row_block(int mr, int64_t K, const float* A, int64_t ars, int64_t acs, const float* B, int64_t ldb,
                         float* C, int64_t ldc, bool accumulate) {
  switch (mr) {
    case 6: micro_tile<6, NV>(K, A, ars, acs, B, ldb, C, ldc, accumulate); break;
    case 5: micro_tile<5, NV>(K, A, ars, acs, B, ldb, C, ldc, accumulate); break;
    case 4: micro_tile<4, NV>(K, A, ars, acs, B, ldb, C, ldc, accumulate); break;
    case 3: micro_tile<3, NV>(K, A, ars, acs, B, ldb, C, ldc, accumulate); break;
    case 2: micro_tile<2, NV>(K, A, ars, acs, B, ldb, C, ldc, accumulate); break;
    default: micro_tile<1, NV>(K, A, ars, acs, B, ldb, C, ldc, accumulate); break;
  }
}

LS_SIMD_CLONES void blocked(int64_t M, int64_t N, int64_t K, const float* A, int64_t ars, int64_t acs,
                            const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  for (int64_t k0 = 0; k0 < std::max<int64_t>(K, 1); k0 += kKC) {
    const int64_t kc = std::min(kKC, K - k0);  // 0 when K == 0: C is cleared or kept
    const bool acc = accumulate || k0 > 0;
    const float* Ak = A + k0 * acs;
    const float* Bk = B + k0 * ldb;
    for (int64_t i = 0; i < M; i += kMR) {
      const int mr = static_cast<int>(std::min<int64_t>(kMR, M - i));
      int64_t j = 0;
      for (; j + 16 <= N; j += 16) row_block<2>(mr, kc, Ak + i * ars, ars, acs, Bk + j, ldb, C + i * ldc + j, ldc, acc);
      if (j < N) row_block<1>(mr, kc, Ak + i * ars, ars, acs, Bk + j, ldb, C + i * ldc + j, ldc, acc);
    }
  }
}

}  // namespace

bool sgemm_small_kernel_available() {
#if defined(LS_SIMD_CLONES_ENABLED)
  // The bit the clones' resolver tests: the kernel is fast only in its
  // x86-64-v3 clone (AVX2 and FMA alone do not make a CPU x86-64-v3).
  return __builtin_cpu_supports("x86-64-v3");
#else
  return false;
#endif
}

bool sgemm_small_uses_kernel(Trans ta, int64_t M, int64_t N, int64_t K) {
  // build/bench_gemm_small on the 2-core Zen 3 development machine (AVX2)
  // against OpenBLAS 0.3.21 with C cleared first, as sgemm does
  // (docs/benchmarks.md): 2.2x, 1.5x, 1.2x and 1.03x as fast at N = K = 16,
  // 32, 64, 128 (M = 512), 0.83x at 256; for A^T with K = 512 tiles, 1.5x,
  // 1.2x, 1.1x at M = N = 16, 32, 64, 0.86x at 128.
  if (N % 8 != 0 || !sgemm_small_kernel_available()) return false;
  return ta == Trans::N ? N <= 128 && K <= 128 : M <= 64 && N <= 64;
}

void sgemm_small_kernel(Trans ta, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                        int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  LS_CHECK(M >= 0 && N >= 0 && K >= 0 && N % 8 == 0, "sgemm_small: size {}x{}x{} (N must be a multiple of 8)", M, N,
           K);
  if (ta == Trans::N)
    blocked(M, N, K, A, lda, 1, B, ldb, C, ldc, accumulate);
  else
    blocked(M, N, K, A, 1, lda, B, ldb, C, ldc, accumulate);
}

void sgemm_small(Trans ta, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                 int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  if (sgemm_small_uses_kernel(ta, M, N, K))
    sgemm_small_kernel(ta, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
  else
    sgemm(ta, Trans::N, M, N, K, 1.f, A, lda, B, ldb, accumulate ? 1.f : 0.f, C, ldc);
}

}  // namespace lockstep::ops
