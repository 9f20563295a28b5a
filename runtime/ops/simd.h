// Kernel helpers for the CPU ops.
//   LS_SIMD_CLONES  compiles a function for AVX2+FMA and for baseline x86-64 and
//                   picks one at load time, so hot loops vectorise 8-wide on
//                   machines that have AVX2 without requiring it. The loader's
//                   resolver tests the CPU's x86-64-v3 feature bit, never its
//                   model name; simd_clone_level() (ops/simd_level.h) says which
//                   clone runs.
//   compute_threads / parallel_for / parallel_ranges
//                   the CPU ops' only parallelism: OpenMP over contiguous
//                   ranges, with as many threads as --threads set. OpenBLAS
//                   itself runs single-threaded (see core/cpu.h), so each
//                   thread's GEMMs run on its own core and no two thread pools
//                   compete for the cores.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

// Not under TSan: gcc instruments the clones' ifunc resolver, which the
// dynamic loader runs before the TSan runtime is up (a segfault at start-up).
// LS_SIMD_CLONES_AVX512 adds an AVX-512 clone, for loops that need its
// 64-bit lane multiplies (the synthetic data's hashes).
#if defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define LS_SIMD_CLONES_ENABLED 1
#define LS_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#define LS_SIMD_CLONES_AVX512 __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define LS_SIMD_CLONES
#define LS_SIMD_CLONES_AVX512
#endif

namespace lockstep::ops {

// Threads to use for `n` independent items of which each thread should get at
// least `min_per_thread`.
inline int compute_threads(int64_t n, int64_t min_per_thread) {
  const int64_t t = std::min<int64_t>(omp_get_max_threads(), n / std::max<int64_t>(min_per_thread, 1));
  return static_cast<int>(std::max<int64_t>(t, 1));
}

// Calls fn(thread, begin, end) for `threads` contiguous parts of [0, n), in
// parallel (inline when threads == 1). fn must not throw.
template <typename Fn>
void parallel_ranges(int threads, int64_t n, Fn&& fn) {
  if (threads <= 1) {
    if (n > 0) fn(0, int64_t{0}, n);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int t = 0; t < threads; ++t) fn(t, n * t / threads, n * (t + 1) / threads);
}

template <typename Fn>
void parallel_for(int64_t n, int64_t min_per_thread, Fn&& fn) {
  parallel_ranges(compute_threads(n, min_per_thread), n, [&](int, int64_t b, int64_t e) { fn(b, e); });
}

}  // namespace lockstep::ops

namespace lockstep::ops {

// 8 floats as a GCC vector: AVX in the AVX2 clone, two SSE registers otherwise.
typedef float f8 __attribute__((vector_size(32)));

#define LS_INLINE inline __attribute__((always_inline))

// Two-operand shuffle with constant indices into the concatenation of a and b:
// GCC's __builtin_shuffle; clang (the fuzz build) spells it __builtin_shufflevector.
typedef int i8 __attribute__((vector_size(32)));
#if defined(__clang__)
#define LS_SHUFFLE8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define LS_SHUFFLE8(a, b, ...) __builtin_shuffle(a, b, i8{__VA_ARGS__})
#endif

LS_INLINE f8 load8(const float* p) {
  f8 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
LS_INLINE void store8(float* p, f8 v) { __builtin_memcpy(p, &v, sizeof v); }
// The first n < 8 floats (the rest of the lanes zero), and their store.
LS_INLINE f8 load_part8(const float* p, int64_t n) {
  f8 v{};
  __builtin_memcpy(&v, p, static_cast<size_t>(n) * sizeof(float));
  return v;
}
LS_INLINE void store_part8(float* p, f8 v, int64_t n) { __builtin_memcpy(p, &v, static_cast<size_t>(n) * sizeof(float)); }
LS_INLINE f8 splat8(float x) { return f8{x, x, x, x, x, x, x, x}; }

// p[0..15] -> even = p[0], p[2], ..., odd = p[1], p[3], ...
LS_INLINE void deinterleave8(const float* p, f8& even, f8& odd) {
  const f8 a = load8(p), b = load8(p + 8);
  even = LS_SHUFFLE8(a, b, 0, 2, 4, 6, 8, 10, 12, 14);
  odd = LS_SHUFFLE8(a, b, 1, 3, 5, 7, 9, 11, 13, 15);
}

// p[2i] = even[i], p[2i+1] = odd[i] for i < 8 (16 floats written).
LS_INLINE void interleave8(float* p, f8 even, f8 odd) {
  store8(p, LS_SHUFFLE8(even, odd, 0, 8, 1, 9, 2, 10, 3, 11));
  store8(p + 8, LS_SHUFFLE8(even, odd, 4, 12, 5, 13, 6, 14, 7, 15));
}

}  // namespace lockstep::ops

namespace lockstep::ops {

// In-register 8x8 transpose: r[i][k] <-> r[k][i] (the standard unpack/shuffle/
// permute sequence, written as generic shuffles GCC maps onto those instructions).
LS_INLINE void transpose8x8(f8* r) {
  f8 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = LS_SHUFFLE8(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = LS_SHUFFLE8(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = LS_SHUFFLE8(t[i], t[i + 2], 0, 1, 8, 9, 4, 5, 12, 13);
    u[i + 1] = LS_SHUFFLE8(t[i], t[i + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    u[i + 2] = LS_SHUFFLE8(t[i + 1], t[i + 3], 0, 1, 8, 9, 4, 5, 12, 13);
    u[i + 3] = LS_SHUFFLE8(t[i + 1], t[i + 3], 2, 3, 10, 11, 6, 7, 14, 15);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = LS_SHUFFLE8(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    r[i + 4] = LS_SHUFFLE8(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

// dst[i*8 + k] = src[k*stride + i] for i < n, k < 8: eight channel rows to
// channel-interleaved positions.
LS_INLINE void interleave_channels(const float* src, int64_t stride, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    f8 r[8];
    for (int k = 0; k < 8; ++k) r[k] = load8(src + k * stride + i);
    transpose8x8(r);
    for (int j = 0; j < 8; ++j) store8(dst + (i + j) * 8, r[j]);
  }
  for (; i < n; ++i)
    for (int k = 0; k < 8; ++k) dst[i * 8 + k] = src[k * stride + i];
}

// The inverse: dst[k*stride + i] = src[i*8 + k].
LS_INLINE void deinterleave_channels(const float* src, int64_t n, float* dst, int64_t stride) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    f8 r[8];
    for (int j = 0; j < 8; ++j) r[j] = load8(src + (i + j) * 8);
    transpose8x8(r);
    for (int k = 0; k < 8; ++k) store8(dst + k * stride + i, r[k]);
  }
  for (; i < n; ++i)
    for (int k = 0; k < 8; ++k) dst[k * stride + i] = src[i * 8 + k];
}

}  // namespace lockstep::ops
