// bench_sgemm: single-core OpenBLAS sgemm rate (the "core's sgemm rate" that
// training throughput is compared against). Square 1024^3 GEMM, repeated for
// about a second; prints GFLOP/s, the OpenBLAS kernel family and a JSON line.
// Runs the kernels the trainer would (core/blas_kernels.h: it may re-execute
// itself with OPENBLAS_CORETYPE set).
// Takes no arguments but --help; any other: one line on stderr, exit 2.
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench_args.h"
#include "core/blas_kernels.h"
#include "core/cpu.h"
#include "ops/gemm/gemm.h"

int main(int argc, char** argv) {
  using namespace lockstep;
  use_fast_blas_kernels(argv);
  try {
    if (bench::no_arguments(argc, argv)) {
      std::puts("usage: bench_sgemm (no arguments): single-thread 1024^3 sgemm rate");
      return 0;
    }
  } catch (const bench::BadArgument& e) {
    std::fprintf(stderr, "bench_sgemm: %s\n", e.what());
    return bench::kBadArguments;
  }
  set_compute_threads(1);
  const int64_t n = 1024;
  std::vector<float> a(n * n, 0.001f), b(n * n, 0.002f), c(n * n);
  ops::sgemm(ops::Trans::N, ops::Trans::N, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);  // warm-up
  int reps = 0;
  const auto t0 = std::chrono::steady_clock::now();
  double dt = 0;
  while (dt < 1.0) {
    ops::sgemm(ops::Trans::N, ops::Trans::N, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    ++reps;
    dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const double gflops = 2.0 * n * n * n * reps / dt / 1e9;
  std::printf("sgemm %ldx%ldx%ld, 1 thread, OpenBLAS %s: %.1f GFLOP/s\n", n, n, n,
              blas_kernels_in_use().describe().c_str(), gflops);
  std::printf("{\"sgemm_gflops\": %.2f, \"blas_core\": \"%s\"}\n", gflops, blas_core_name().c_str());
  return c[0] > 0 ? 0 : 1;
}
