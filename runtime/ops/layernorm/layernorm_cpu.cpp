// Layer normalisation kernels: rows split across threads for the forward and
// for dx, each row's sums 16 lanes wide in a fixed order; blocks of kTile
// columns split across threads for dweight and dbias, each column's sum in
// registers over the rows in row order.
#include "ops/layernorm/layernorm_cpu.h"

#include <algorithm>
#include <cmath>

#include "ops/simd.h"

namespace lockstep::ops {
namespace {

constexpr int64_t kGrainElems = 1 << 14;  // elements per thread, at least
constexpr int64_t kTile = 32;             // columns per block of dweight and dbias (4 x 8 lanes)

typedef float f4 __attribute__((vector_size(16)));
typedef double d4 __attribute__((vector_size(32)));

LS_INLINE float hsum8(f8 v) {
  float t = 0.f;
  for (int i = 0; i < 8; ++i) t += v[i];
  return t;
}

LS_INLINE d4 widen4(const float* p) {
  f4 v;
  __builtin_memcpy(&v, p, sizeof v);
  return __builtin_convertvector(v, d4);
}

// The row sums below run 16 lanes wide (two or four accumulators, so the adds
// do not wait on each other), an 8-wide block left over going into the first
// half; the lanes are then added in a fixed order, then the scalar tail.

// sum of p[0, n) in double.
LS_INLINE double sum_double(const float* p, int64_t n) {
  d4 a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 += widen4(p + i);
    a1 += widen4(p + i + 4);
    a2 += widen4(p + i + 8);
    a3 += widen4(p + i + 12);
  }
  if (i + 8 <= n) {
    a0 += widen4(p + i);
    a1 += widen4(p + i + 4);
    i += 8;
  }
  const d4 lo = a0 + a2, hi = a1 + a3;
  double t = 0;
  for (int k = 0; k < 4; ++k) t += lo[k];
  for (int k = 0; k < 4; ++k) t += hi[k];
  for (; i < n; ++i) t += p[i];
  return t;
}

// sum of (p[i] - m)^2 over [0, n) in float.
LS_INLINE float centered_sumsq(const float* p, int64_t n, float m) {
  f8 q0 = splat8(0.f), q1 = q0;
  const f8 mv = splat8(m);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const f8 d0 = load8(p + i) - mv, d1 = load8(p + i + 8) - mv;
    q0 += d0 * d0;
    q1 += d1 * d1;
  }
  if (i + 8 <= n) {
    const f8 d = load8(p + i) - mv;
    q0 += d * d;
    i += 8;
  }
  float t = hsum8(q0 + q1);
  for (; i < n; ++i) t += (p[i] - m) * (p[i] - m);
  return t;
}

LS_SIMD_CLONES void forward_rows(int64_t rb, int64_t re, int64_t c, const float* x, const float* w, const float* b,
                                 float eps, float* y, float* mean, float* rstd) {
  const float inv_c = 1.f / static_cast<float>(c);
  for (int64_t r = rb; r < re; ++r) {
    const float* xr = x + r * c;
    float* yr = y + r * c;
    const float m = static_cast<float>(sum_double(xr, c) / static_cast<double>(c));
    const float v = centered_sumsq(xr, c, m) * inv_c;
    const float s = 1.f / std::sqrt(v + eps);
    for (int64_t i = 0; i < c; ++i) yr[i] = (xr[i] - m) * s * w[i] + b[i];
    mean[r] = m;
    rstd[r] = s;
  }
}

LS_SIMD_CLONES void input_grad_rows(int64_t rb, int64_t re, int64_t c, const float* x, const float* w,
                                    const float* mean, const float* rstd, const float* dy, float* dx) {
  const float inv_c = 1.f / static_cast<float>(c);
  for (int64_t r = rb; r < re; ++r) {
    const float* xr = x + r * c;
    const float* gr = dy + r * c;
    float* dxr = dx + r * c;
    const float m = mean[r], s = rstd[r];
    // dnorm_mean and dnorm_norm_mean: the means of dnorm and dnorm * norm.
    f8 a0 = splat8(0.f), a1 = a0, q0 = a0, q1 = a0;
    const f8 mv = splat8(m), sv = splat8(s);
    int64_t i = 0;
    for (; i + 16 <= c; i += 16) {
      const f8 norm0 = (load8(xr + i) - mv) * sv, norm1 = (load8(xr + i + 8) - mv) * sv;
      const f8 dnorm0 = load8(w + i) * load8(gr + i), dnorm1 = load8(w + i + 8) * load8(gr + i + 8);
      a0 += dnorm0;
      a1 += dnorm1;
      q0 += dnorm0 * norm0;
      q1 += dnorm1 * norm1;
    }
    if (i + 8 <= c) {
      const f8 norm = (load8(xr + i) - mv) * sv;
      const f8 dnorm = load8(w + i) * load8(gr + i);
      a0 += dnorm;
      q0 += dnorm * norm;
      i += 8;
    }
    float dnorm_mean = hsum8(a0 + a1), dnorm_norm_mean = hsum8(q0 + q1);
    for (; i < c; ++i) {
      const float norm = (xr[i] - m) * s;
      const float dnorm = w[i] * gr[i];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean *= inv_c;
    dnorm_norm_mean *= inv_c;
    for (i = 0; i < c; ++i) {
      const float norm = (xr[i] - m) * s;
      const float dnorm = w[i] * gr[i];
      dxr[i] = (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  }
}

// dweight and dbias for the column blocks [tb, te): full blocks in registers,
// the last one (c not a multiple of kTile) column by column. Which columns go
// which way depends on c alone, never on the threads' split.
LS_SIMD_CLONES void param_grad_tiles(int64_t tb, int64_t te, int64_t n, int64_t c, const float* x, const float* mean,
                                     const float* rstd, const float* dy, float* dw, float* db, bool accumulate) {
  for (int64_t t = tb; t < te; ++t) {
    const int64_t c0 = t * kTile, width = std::min(kTile, c - c0);
    float sw[kTile], sb[kTile];
    if (width == kTile) {
      f8 aw[4], ab[4];
      for (int k = 0; k < 4; ++k) aw[k] = ab[k] = splat8(0.f);
      for (int64_t r = 0; r < n; ++r) {
        const float* xr = x + r * c + c0;
        const float* gr = dy + r * c + c0;
        const f8 mv = splat8(mean[r]), sv = splat8(rstd[r]);
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const f8 g = load8(gr + 8 * k);
          const f8 norm = (load8(xr + 8 * k) - mv) * sv;
          ab[k] += g;
          aw[k] += norm * g;
        }
      }
      for (int k = 0; k < 4; ++k) {
        store8(sw + 8 * k, aw[k]);
        store8(sb + 8 * k, ab[k]);
      }
    } else {
      std::fill_n(sw, width, 0.f);
      std::fill_n(sb, width, 0.f);
      for (int64_t r = 0; r < n; ++r) {
        const float* xr = x + r * c + c0;
        const float* gr = dy + r * c + c0;
        const float m = mean[r], s = rstd[r];
        for (int64_t j = 0; j < width; ++j) {
          const float norm = (xr[j] - m) * s;
          sb[j] += gr[j];
          sw[j] += norm * gr[j];
        }
      }
    }
    for (int64_t j = 0; j < width; ++j) {
      dw[c0 + j] = accumulate ? dw[c0 + j] + sw[j] : sw[j];
      db[c0 + j] = accumulate ? db[c0 + j] + sb[j] : sb[j];
    }
  }
}

}  // namespace

void layernorm_forward_cpu(int64_t n, int64_t c, const float* x, const float* weight, const float* bias, float eps,
                           float* y, float* mean, float* rstd) {
  const int64_t grain = std::max<int64_t>(1, kGrainElems / std::max<int64_t>(c, 1));
  parallel_for(n, grain, [&](int64_t rb, int64_t re) { forward_rows(rb, re, c, x, weight, bias, eps, y, mean, rstd); });
}

void layernorm_backward_cpu(int64_t n, int64_t c, const float* x, const float* weight, const float* mean,
                            const float* rstd, const float* dy, float* dx, float* dweight, float* dbias,
                            bool accumulate) {
  // dweight and dbias first: dx may overwrite dy.
  const int64_t tiles = (c + kTile - 1) / kTile;
  const int64_t tile_grain = std::max<int64_t>(1, kGrainElems / std::max<int64_t>(n * kTile, 1));
  parallel_for(tiles, tile_grain, [&](int64_t tb, int64_t te) {
    param_grad_tiles(tb, te, n, c, x, mean, rstd, dy, dweight, dbias, accumulate);
  });
  if (dx == nullptr) return;
  const int64_t grain = std::max<int64_t>(1, kGrainElems / std::max<int64_t>(c, 1));
  parallel_for(n, grain, [&](int64_t rb, int64_t re) { input_grad_rows(rb, re, c, x, weight, mean, rstd, dy, dx); });
}

}  // namespace lockstep::ops
