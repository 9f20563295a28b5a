// Batch normalisation kernels: channels split across threads; each channel's
// N planes are contiguous runs of H*W floats.
#include <algorithm>

#include "ops/batchnorm.h"
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

}  // namespace

void batchnorm_sum_cpu(const BatchNormShape& s, const float* x, double* sum) {
  parallel_for(s.c, channel_grain(s), [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      double a = 0;
      for (int64_t n = 0; n < s.n; ++n) plane_sum(x + (n * s.c + c) * s.hw, s.hw, a);
      sum[c] = a;
    }
  });
}

void batchnorm_centered_sumsq_cpu(const BatchNormShape& s, const float* x, const float* mean, double* m2) {
  parallel_for(s.c, channel_grain(s), [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      double q = 0;
      for (int64_t n = 0; n < s.n; ++n) plane_centered_sumsq(x + (n * s.c + c) * s.hw, s.hw, mean[c], q);
      m2[c] = q;
    }
  });
}

void batchnorm_apply_cpu(const BatchNormShape& s, const float* x, const float* scale, const float* shift, float* y,
                         bool relu) {
  parallel_for(s.n * s.c, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, s.hw)), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const int64_t c = p % s.c;
      plane_apply(x + p * s.hw, s.hw, scale[c], shift[c], y + p * s.hw, relu);
    }
  });
}

void batchnorm_apply_add_relu_cpu(const BatchNormShape& s, const float* x, const float* scale, const float* shift,
                                  const float* r, float* y) {
  parallel_for(s.n * s.c, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, s.hw)), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const int64_t c = p % s.c;
      plane_apply_add_relu(x + p * s.hw, s.hw, scale[c], shift[c], r + p * s.hw, y + p * s.hw);
    }
  });
}

void batchnorm_backward_reduce_cpu(const BatchNormShape& s, const float* x, const float* y, float* dy, bool relu,
                                   const float* mean, double* sum_dy, double* sum_dy_xmu) {
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
  parallel_for(s.n * s.c, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, s.hw)), [&](int64_t pb, int64_t pe) {
    for (int64_t p = pb; p < pe; ++p) {
      const int64_t c = p % s.c;
      plane_backward_apply(x + p * s.hw, dy + p * s.hw, s.hw, a[c], b[c], d[c], dx + p * s.hw);
    }
  });
}

}  // namespace lockstep::ops
