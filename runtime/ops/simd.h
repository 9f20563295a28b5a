// Kernel helpers for the CPU ops.
//   LS_SIMD_CLONES  compiles a function for AVX2+FMA and for baseline x86-64 and
//                   picks one at load time, so hot loops vectorise 8-wide on
//                   machines that have AVX2 without requiring it.
//   parallel_for    splits [0, n) into contiguous ranges over the OpenMP threads
//                   set by --threads (runs inline for small n or one thread).
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

#if defined(__x86_64__) && !defined(__clang__)
#define LS_SIMD_CLONES __attribute__((target_clones("arch=haswell", "default")))
#else
#define LS_SIMD_CLONES
#endif

namespace lockstep::ops {

template <typename Fn>
void parallel_for(int64_t n, int64_t min_per_thread, Fn&& fn) {
  const int threads = omp_get_max_threads();
  if (threads <= 1 || n < 2 * min_per_thread) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  const int64_t parts = std::min<int64_t>(threads, n / min_per_thread);
#pragma omp parallel for schedule(static) num_threads(static_cast<int>(parts))
  for (int64_t t = 0; t < parts; ++t) fn(n * t / parts, n * (t + 1) / parts);
}

}  // namespace lockstep::ops
