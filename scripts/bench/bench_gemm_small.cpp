// bench_gemm_small: sgemm_small's register-blocked kernel against OpenBLAS
// (ops::sgemm, which clears C first, as the Winograd products need) on the
// product shapes of a Winograd convolution, one thread. Prints, per shape,
// both rates, their ratio and which of the two sgemm_small picks, then a JSON
// line. The shapes:
//   A  * B: M = 512 tiles, N = K = channels     (forward and data gradient)
//   A^T* B: M = N = channels, K = 512 tiles      (weight gradient, accumulating)
// Takes no arguments but --help; any other: one line on stderr, exit 2.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_args.h"
#include "core/blas_kernels.h"
#include "core/cpu.h"
#include "core/rng.h"
#include "ops/gemm/gemm.h"
#include "ops/simd_level.h"

namespace {

using namespace lockstep;
using ops::Trans;

struct Shape {
  Trans ta;
  int64_t M, N, K;
};

// Median seconds per call of fn over 5 windows of about 0.1 s each.
template <typename Fn>
double seconds_per_call(Fn&& fn) {
  fn();
  std::vector<double> per;
  for (int w = 0; w < 5; ++w) {
    int calls = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double dt = 0;
    while (dt < 0.1) {
      fn();
      ++calls;
      dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    per.push_back(dt / calls);
  }
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  use_fast_blas_kernels(argv);  // the trainer's OpenBLAS kernels (core/blas_kernels.h)
  try {
    if (bench::no_arguments(argc, argv)) {
      std::puts("usage: bench_gemm_small (no arguments): sgemm_small's kernel against OpenBLAS, 1 thread");
      return 0;
    }
  } catch (const bench::BadArgument& e) {
    std::fprintf(stderr, "bench_gemm_small: %s\n", e.what());
    return bench::kBadArguments;
  }
  set_compute_threads(1);
  std::vector<Shape> shapes;
  for (int64_t c : {16, 32, 64, 128, 256}) shapes.push_back({Trans::N, 512, c, c});
  for (int64_t c : {16, 32, 64, 128, 256}) shapes.push_back({Trans::T, c, c, 512});
  std::printf("# sgemm_small kernel (%s clone) vs OpenBLAS %s, 1 thread; GFLOP/s\n", ops::simd_clone_level().c_str(),
              blas_kernels_in_use().describe().c_str());
  std::printf("# %-4s %5s %5s %5s %10s %10s %7s  %s\n", "op", "M", "N", "K", "kernel", "openblas", "ratio",
              "sgemm_small uses");
  // fmt, not chained std::string +, which trips GCC 12's -Wrestrict false positive.
  std::string json = fmt::format("{{\"bench\":\"gemm_small\",\"blas_core\":\"{}\",\"shapes\":[", blas_core_name());
  Rng rng(3);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    std::vector<float> a(static_cast<size_t>(s.M * s.K)), b(static_cast<size_t>(s.K * s.N)),
        c(static_cast<size_t>(s.M * s.N));
    for (float& v : a) v = rng.normal();
    for (float& v : b) v = rng.normal();
    const int64_t lda = s.ta == Trans::N ? s.K : s.M;
    // The weight gradient accumulates into C; the forward products overwrite it.
    const bool acc = s.ta == Trans::T;
    const double t_kernel = seconds_per_call([&] {
      ops::sgemm_small_kernel(s.ta, s.M, s.N, s.K, a.data(), lda, b.data(), s.N, c.data(), s.N, acc);
    });
    const double t_blas = seconds_per_call([&] {
      ops::sgemm(s.ta, Trans::N, s.M, s.N, s.K, 1.f, a.data(), lda, b.data(), s.N, acc ? 1.f : 0.f, c.data(), s.N);
    });
    const double flop = 2.0 * static_cast<double>(s.M * s.N * s.K);
    const double gk = flop / t_kernel / 1e9, gb = flop / t_blas / 1e9;
    const char* op = s.ta == Trans::N ? "A*B" : "At*B";
    const char* pick = ops::sgemm_small_uses_kernel(s.ta, s.M, s.N, s.K) ? "kernel" : "openblas";
    std::printf("  %-4s %5ld %5ld %5ld %10.1f %10.1f %6.2fx  %s\n", op, s.M, s.N, s.K, gk, gb, gk / gb, pick);
    json += fmt::format("{}{{\"op\":\"{}\",\"M\":{},\"N\":{},\"K\":{},\"kernel_gflops\":{:.1f},"
                        "\"openblas_gflops\":{:.1f},\"uses\":\"{}\"}}",
                        i ? "," : "", op, s.M, s.N, s.K, gk, gb, pick);
  }
  std::printf("%s]}\n", json.c_str());
  return 0;
}
