// A timed sgemm loop (sgemm_rate.h).
#include "sgemm_rate.h"

#include <chrono>
#include <cstdint>
#include <vector>

#include "core/cpu.h"
#include "ops/gemm/gemm.h"

namespace lockstep {

double measure_sgemm_gflops(double seconds) {
  // OpenBLAS runs single-threaded inside each compute thread (ops/simd.h), as
  // the ops call it: one 1024^3 product per compute thread at once, each on
  // its own buffers, the same number of products on every thread.
  constexpr int64_t n = 1024;
  const int threads = compute_threads();
  std::vector<std::vector<float>> a(threads), b(threads), c(threads);
  for (int t = 0; t < threads; ++t) {
    a[t].assign(n * n, 0.001f);
    b[t].assign(n * n, 0.002f);
    c[t].assign(n * n, 0.f);
  }
  auto round = [&] {
#pragma omp parallel for schedule(static, 1) num_threads(threads)
    for (int t = 0; t < threads; ++t)
      ops::sgemm(ops::Trans::N, ops::Trans::N, n, n, n, 1.f, a[t].data(), n, b[t].data(), n, 0.f, c[t].data(), n);
  };
  round();  // warm-up: OpenBLAS's buffers, the threads
  int rounds = 0;
  const auto t0 = std::chrono::steady_clock::now();
  double dt = 0;
  while (dt < seconds || rounds < 2) {
    round();
    ++rounds;
    dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return 2.0 * n * n * n * threads * rounds / dt / 1e9;
}

}  // namespace lockstep
