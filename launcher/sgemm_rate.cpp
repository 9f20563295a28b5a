// A timed sgemm loop (sgemm_rate.h).
#include "sgemm_rate.h"

#include <chrono>
#include <cstdint>
#include <vector>

#include "ops/gemm/gemm.h"

namespace lockstep {

double measure_sgemm_gflops(double seconds) {
  constexpr int64_t n = 1024;
  std::vector<float> a(n * n, 0.001f), b(n * n, 0.002f), c(n * n);
  auto once = [&] { ops::sgemm(ops::Trans::N, ops::Trans::N, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n); };
  once();  // warm-up: OpenBLAS's buffers, the threads
  int reps = 0;
  const auto t0 = std::chrono::steady_clock::now();
  double dt = 0;
  while (dt < seconds || reps < 2) {
    once();
    ++reps;
    dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return 2.0 * n * n * n * reps / dt / 1e9;
}

}  // namespace lockstep
