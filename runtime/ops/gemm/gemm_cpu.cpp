// sgemm through OpenBLAS's cblas interface.
#include "ops/gemm/gemm.h"

#include <cblas.h>

#include <cstring>
#include <mutex>

#include "core/error.h"

namespace lockstep::ops {

void sgemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  LS_CHECK(M >= 0 && N >= 0 && K >= 0, "sgemm: negative size {}x{}x{}", M, N, K);
  LS_CHECK(M < (int64_t{1} << 31) && N < (int64_t{1} << 31) && K < (int64_t{1} << 31), "sgemm: size over 2^31");
  if (M == 0 || N == 0) return;
  // The ops parallelise themselves and call sgemm from several threads at once;
  // OpenBLAS's own thread pool must stay at one thread (see ops/simd.h).
  static std::once_flag single_threaded;
  std::call_once(single_threaded, [] { openblas_set_num_threads(1); });
  if (beta == 0.f) {
    // OpenBLAS 0.3.21 clears C for beta = 0 with a slow separate pass
    // (sgemm_beta was 9% of a lenet step); a memset and beta = 1 is faster.
    for (int64_t i = 0; i < M; ++i) std::memset(C + i * ldc, 0, static_cast<size_t>(N) * sizeof(float));
    beta = 1.f;
  }
  cblas_sgemm(CblasRowMajor, ta == Trans::N ? CblasNoTrans : CblasTrans, tb == Trans::N ? CblasNoTrans : CblasTrans,
              static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C, static_cast<blasint>(ldc));
}

}  // namespace lockstep::ops
