// Batch normalisation kernels: channels split across threads; each channel's
// N planes are contiguous runs of H*W floats, walked plane by plane, or, for
// planes under kRowPlane floats, along the images' rows (see by_rows).
#include <algorithm>

#include "ops/batchnorm/batchnorm_cpu.h"
#include "ops/simd.h"

namespace lockstep::ops {
namespace {

constexpr int64_t kGrainElems = 1 << 14;
int64_t channel_grain(const BatchNormShape& s) {
  return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, s.n * s.hw));
}

LS_INLINE float hsum8(f8 v) {
  float t = 0.f;
  for (int i = 0; i < 8; ++i) t += v[i];
  return t;
}

LS_SIMD_CLONES void plane_sum(const float* p, int64_t n, double& sum) {
  f8 s = splat8(0.f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) s += load8(p + i);
  float ts = hsum8(s);
  for (; i < n; ++i) ts += p[i];
  sum += ts;
}

LS_SIMD_CLONES void plane_centered_sumsq(const float* p, int64_t n, float mean, double& m2) {
  f8 q = splat8(0.f);
  const f8 m = splat8(mean);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const f8 d = load8(p + i) - m;
    q += d * d;
  }
  float tq = hsum8(q);
  for (; i < n; ++i) tq += (p[i] - mean) * (p[i] - mean);
  m2 += tq;
}

LS_SIMD_CLONES void plane_apply(const float* x, int64_t n, float scale, float shift, float* y, bool relu) {
  if (relu)
    for (int64_t i = 0; i < n; ++i) y[i] = std::max(0.f, x[i] * scale + shift);
  else
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale + shift;
}

LS_SIMD_CLONES void plane_apply_add_relu(const float* x, int64_t n, float scale, float shift, const float* r,
                                         float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const float t = x[i] * scale + shift;  // as plane_apply
    const float v = t + r[i];              // as add_relu_cpu
    y[i] = v > 0.f ? v : 0.f;
  }
}

// With relu, masks dy in place in the same pass that sums it.
LS_SIMD_CLONES void plane_backward_sums(const float* x, const float* y, float* dy, int64_t n, bool relu, float mean,
                                        double& sum_dy, double& sum_dy_xmu) {
  f8 s = splat8(0.f), q = splat8(0.f);
  const f8 m = splat8(mean), zero = splat8(0.f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    f8 g = load8(dy + i);
    if (relu) {
      g = load8(y + i) > zero ? g : zero;
      store8(dy + i, g);
    }
    s += g;
    q += g * (load8(x + i) - m);
  }
  float ts = hsum8(s), tq = hsum8(q);
  for (; i < n; ++i) {
    if (relu) dy[i] = y[i] > 0.f ? dy[i] : 0.f;
    ts += dy[i];
    tq += dy[i] * (x[i] - mean);
  }
  sum_dy += ts;
  sum_dy_xmu += tq;
}

LS_SIMD_CLONES void plane_backward_apply(const float* x, const float* dy, int64_t n, float a, float b, float d,
                                         float* dx) {
  for (int64_t i = 0; i < n; ++i) dx[i] = a * dy[i] + b * x[i] + d;
}

// Planes shorter than kRowPlane (resnet50's 4x4 and 2x2 stages) are too
// short for the per-plane kernels above: per 4 or 16 values a call, a
// horizontal sum and a scalar tail. There the kernels run along the images'
// rows instead. Measured per value over the five passes (batch 32, 2 threads,
// 2026-11-24): per plane 3.0-4.8 ns at 2x2 and 1.0-1.3 ns at 4x4 (0.4-0.7 ns
// at 8x8 and up); by rows 0.58 ns at 2x2 and 0.55 at 4x4. A block of whole
// channels [c0, c1) is L = (c1 - c0) * hw contiguous "lanes" in every image; per-channel values are expanded to lanes once per block,
// sums accumulate per lane in double across the images (in image order) and
// each channel adds its hw lanes at the end. Threads split channels, so the
// results do not depend on the thread count.
constexpr int64_t kRowPlane = 32;
constexpr int64_t kLanes = 1024;

bool by_rows(const BatchNormShape& s) { return s.hw < kRowPlane; }

// fn(c0, c1, L) for blocks of whole channels of at most kLanes lanes in [cb, ce).
template <typename Fn>
void lane_blocks(const BatchNormShape& s, int64_t cb, int64_t ce, Fn&& fn) {
  const int64_t per = std::max<int64_t>(1, kLanes / std::max<int64_t>(1, s.hw));
  for (int64_t c0 = cb; c0 < ce; c0 += per) {
    const int64_t c1 = std::min(ce, c0 + per);
    fn(c0, c1, (c1 - c0) * s.hw);
  }
}

void expand(const float* v, int64_t c0, int64_t c1, int64_t hw, float* lanes) {
  for (int64_t c = c0; c < c1; ++c) std::fill_n(lanes + (c - c0) * hw, hw, v[c]);
}

// out[c] = the sum of channel c's hw lanes, for c in [c0, c1).
void add_lanes(const double* acc, int64_t c0, int64_t c1, int64_t hw, double* out) {
  for (int64_t c = c0; c < c1; ++c) {
    double t = 0;
    for (int64_t i = 0; i < hw; ++i) t += acc[(c - c0) * hw + i];
    out[c] = t;
  }
}

// The apply passes by rows: fn(c0, L, scale lanes, shift lanes) per lane block,
// threads splitting the channels.
template <typename Fn>
void rows_scale_shift(const BatchNormShape& s, const float* scale, const float* shift, Fn&& fn) {
  parallel_for(s.c, channel_grain(s), [&](int64_t cb, int64_t ce) {
    float sc[kLanes], sh[kLanes];
    lane_blocks(s, cb, ce, [&](int64_t c0, int64_t c1, int64_t L) {
      expand(scale, c0, c1, s.hw, sc);
      expand(shift, c0, c1, s.hw, sh);
      fn(c0, L, sc, sh);
    });
  });
}

// x: the block's first lane in image 0; images are `stride` floats apart.
LS_SIMD_CLONES void rows_sum(const float* x, int64_t n, int64_t stride, int64_t L, double* acc) {
  std::fill_n(acc, L, 0.0);
  for (int64_t k = 0; k < n; ++k)
    for (int64_t j = 0; j < L; ++j) acc[j] += x[k * stride + j];
}

LS_SIMD_CLONES void rows_centered_sumsq(const float* x, int64_t n, int64_t stride, int64_t L, const float* m,
                                        double* acc) {
  std::fill_n(acc, L, 0.0);
  for (int64_t k = 0; k < n; ++k)
    for (int64_t j = 0; j < L; ++j) {
      const float d = x[k * stride + j] - m[j];
      acc[j] += d * d;
    }
}

LS_SIMD_CLONES void rows_apply(const float* x, int64_t n, int64_t stride, int64_t L, const float* scale,
                               const float* shift, float* y, bool relu) {
  for (int64_t k = 0; k < n; ++k) {
    const float* xr = x + k * stride;
    float* yr = y + k * stride;
    if (relu)
      for (int64_t j = 0; j < L; ++j) yr[j] = std::max(0.f, xr[j] * scale[j] + shift[j]);
    else
      for (int64_t j = 0; j < L; ++j) yr[j] = xr[j] * scale[j] + shift[j];
  }
}

LS_SIMD_CLONES void rows_apply_add_relu(const float* x, int64_t n, int64_t stride, int64_t L, const float* scale,
                                        const float* shift, const float* r, float* y) {
  for (int64_t k = 0; k < n; ++k)
    for (int64_t j = 0; j < L; ++j) {
      const int64_t e = k * stride + j;
      const float t = x[e] * scale[j] + shift[j];  // as plane_apply
      const float v = t + r[e];                    // as add_relu_cpu
      y[e] = v > 0.f ? v : 0.f;
    }
}

template <bool kRelu>
LS_INLINE void rows_backward_sums_impl(const float* x, const float* y, float* dy, int64_t n, int64_t stride, int64_t L,
                                       const float* m, double* sum_dy, double* sum_dy_xmu) {
  std::fill_n(sum_dy, L, 0.0);
  std::fill_n(sum_dy_xmu, L, 0.0);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t o = k * stride;
    if constexpr (kRelu)
      for (int64_t j = 0; j < L; ++j) dy[o + j] = y[o + j] > 0.f ? dy[o + j] : 0.f;
    for (int64_t j = 0; j < L; ++j) {
      const float g = dy[o + j];
      sum_dy[j] += g;
      sum_dy_xmu[j] += g * (x[o + j] - m[j]);
    }
  }
}

// With relu, masks dy in place one image row at a time, then sums that row
// while it is in cache (mask and sums in one loop did not vectorise).
LS_SIMD_CLONES void rows_backward_sums(const float* x, const float* y, float* dy, int64_t n, int64_t stride,
                                       int64_t L, bool relu, const float* m, double* sum_dy, double* sum_dy_xmu) {
  if (relu)
    rows_backward_sums_impl<true>(x, y, dy, n, stride, L, m, sum_dy, sum_dy_xmu);
  else
    rows_backward_sums_impl<false>(x, y, dy, n, stride, L, m, sum_dy, sum_dy_xmu);
}

LS_SIMD_CLONES void rows_backward_apply(const float* x, const float* dy, int64_t n, int64_t stride, int64_t L,
                                        const float* a, const float* b, const float* d, float* dx) {
  for (int64_t k = 0; k < n; ++k)
    for (int64_t j = 0; j < L; ++j) {
      const int64_t e = k * stride + j;
      dx[e] = a[j] * dy[e] + b[j] * x[e] + d[j];
    }
}

}  // namespace

void batchnorm_sum_cpu(const BatchNormShape& s, const float* x, double* sum) {
  if (by_rows(s)) {
    parallel_for(s.c, channel_grain(s), [&](int64_t cb, int64_t ce) {
      double acc[kLanes];
      lane_blocks(s, cb, ce, [&](int64_t c0, int64_t c1, int64_t L) {
        rows_sum(x + c0 * s.hw, s.n, s.c * s.hw, L, acc);
        add_lanes(acc, c0, c1, s.hw, sum);
      });
    });
    return;
  }
  parallel_for(s.c, channel_grain(s), [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      double a = 0;
      for (int64_t n = 0; n < s.n; ++n) plane_sum(x + (n * s.c + c) * s.hw, s.hw, a);
      sum[c] = a;
    }
  });
}

void batchnorm_centered_sumsq_cpu(const BatchNormShape& s, const float* x, const float* mean, double* m2) {
  if (by_rows(s)) {
    parallel_for(s.c, channel_grain(s), [&](int64_t cb, int64_t ce) {
      double acc[kLanes];
      float m[kLanes];
      lane_blocks(s, cb, ce, [&](int64_t c0, int64_t c1, int64_t L) {
        expand(mean, c0, c1, s.hw, m);
        rows_centered_sumsq(x + c0 * s.hw, s.n, s.c * s.hw, L, m, acc);
        add_lanes(acc, c0, c1, s.hw, m2);
      });
    });
    return;
  }
  parallel_for(s.c, channel_grain(s), [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      double q = 0;
      for (int64_t n = 0; n < s.n; ++n) plane_centered_sumsq(x + (n * s.c + c) * s.hw, s.hw, mean[c], q);
      m2[c] = q;
    }
  });
}

void batchnorm_moments_cpu(const BatchNormShape& s, const float* x, double count, double* sum, float* mean,
                           double* m2) {
  if (by_rows(s)) {  // lanes span channels: the two passes as they stand
    batchnorm_sum_cpu(s, x, sum);
    for (int64_t c = 0; c < s.c; ++c) mean[c] = static_cast<float>(sum[c] / count);
    batchnorm_centered_sumsq_cpu(s, x, mean, m2);
    return;
  }
  parallel_for(s.c, channel_grain(s), [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      double a = 0, q = 0;
      for (int64_t n = 0; n < s.n; ++n) plane_sum(x + (n * s.c + c) * s.hw, s.hw, a);
      sum[c] = a;
      mean[c] = static_cast<float>(a / count);
      for (int64_t n = 0; n < s.n; ++n) plane_centered_sumsq(x + (n * s.c + c) * s.hw, s.hw, mean[c], q);
      m2[c] = q;
    }
  });
}

void batchnorm_apply_cpu(const BatchNormShape& s, const float* x, const float* scale, const float* shift, float* y,
                         bool relu) {
  if (by_rows(s)) {
    rows_scale_shift(s, scale, shift, [&](int64_t c0, int64_t L, const float* sc, const float* sh) {
      rows_apply(x + c0 * s.hw, s.n, s.c * s.hw, L, sc, sh, y + c0 * s.hw, relu);
    });
    return;
  }
  parallel_for(s.n * s.c, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, s.hw)), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const int64_t c = p % s.c;
      plane_apply(x + p * s.hw, s.hw, scale[c], shift[c], y + p * s.hw, relu);
    }
  });
}

void batchnorm_apply_add_relu_cpu(const BatchNormShape& s, const float* x, const float* scale, const float* shift,
                                  const float* r, float* y) {
  if (by_rows(s)) {
    rows_scale_shift(s, scale, shift, [&](int64_t c0, int64_t L, const float* sc, const float* sh) {
      rows_apply_add_relu(x + c0 * s.hw, s.n, s.c * s.hw, L, sc, sh, r + c0 * s.hw, y + c0 * s.hw);
    });
    return;
  }
  parallel_for(s.n * s.c, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, s.hw)), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const int64_t c = p % s.c;
      plane_apply_add_relu(x + p * s.hw, s.hw, scale[c], shift[c], r + p * s.hw, y + p * s.hw);
    }
  });
}

void batchnorm_backward_reduce_cpu(const BatchNormShape& s, const float* x, const float* y, float* dy, bool relu,
                                   const float* mean, double* sum_dy, double* sum_dy_xmu) {
  if (by_rows(s)) {
    parallel_for(s.c, channel_grain(s), [&](int64_t cb, int64_t ce) {
      double as[kLanes], aq[kLanes];
      float m[kLanes];
      lane_blocks(s, cb, ce, [&](int64_t c0, int64_t c1, int64_t L) {
        expand(mean, c0, c1, s.hw, m);
        rows_backward_sums(x + c0 * s.hw, y ? y + c0 * s.hw : nullptr, dy + c0 * s.hw, s.n, s.c * s.hw, L, relu, m,
                           as, aq);
        add_lanes(as, c0, c1, s.hw, sum_dy);
        add_lanes(aq, c0, c1, s.hw, sum_dy_xmu);
      });
    });
    return;
  }
  parallel_for(s.c, channel_grain(s), [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      double a = 0, q = 0;
      for (int64_t n = 0; n < s.n; ++n) {
        const int64_t off = (n * s.c + c) * s.hw;
        plane_backward_sums(x + off, y + off, dy + off, s.hw, relu, mean[c], a, q);
      }
      sum_dy[c] = a;
      sum_dy_xmu[c] = q;
    }
  });
}

void batchnorm_backward_apply_cpu(const BatchNormShape& s, const float* x, const float* dy, const float* a,
                                  const float* b, const float* d, float* dx) {
  if (by_rows(s)) {
    parallel_for(s.c, channel_grain(s), [&](int64_t cb, int64_t ce) {
      float la[kLanes], lb[kLanes], ld[kLanes];
      lane_blocks(s, cb, ce, [&](int64_t c0, int64_t c1, int64_t L) {
        expand(a, c0, c1, s.hw, la);
        expand(b, c0, c1, s.hw, lb);
        expand(d, c0, c1, s.hw, ld);
        rows_backward_apply(x + c0 * s.hw, dy + c0 * s.hw, s.n, s.c * s.hw, L, la, lb, ld, dx + c0 * s.hw);
      });
    });
    return;
  }
  parallel_for(s.n * s.c, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, s.hw)), [&](int64_t pb, int64_t pe) {
    for (int64_t p = pb; p < pe; ++p) {
      const int64_t c = p % s.c;
      plane_backward_apply(x + p * s.hw, dy + p * s.hw, s.hw, a[c], b[c], d[c], dx + p * s.hw);
    }
  });
}

}  // namespace lockstep::ops
