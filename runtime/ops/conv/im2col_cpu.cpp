// im2col/col2im with fast paths for 1x1 stride-1 layers (plane copies) and
// stride 1 (contiguous row copies).
#include "ops/conv/im2col.h"

#include <algorithm>
#include <cstring>

#include "ops/simd.h"

namespace lockstep::ops {

namespace {

// dst[0..n) = src[0..n), n >= 8, as 8-wide copies with an overlapping last one
// (rows here are short: 9 to 30 floats, where call or loop overhead dominates).
LS_INLINE void copy_row(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + 8 < n; i += 8) store8(dst + i, load8(src + i));
  store8(dst + n - 8, load8(src + n - 8));
}

// dst[0..n) += src[0..n).
LS_INLINE void add_row(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store8(dst + i, load8(dst + i) + load8(src + i));
  for (; i < n; ++i) dst[i] += src[i];
}

// Stride 1, no padding, rows of at least 8: every output row is OH copies of OW floats.
LS_SIMD_CLONES void im2col_s1p0(const ConvGeometry& g, const float* x, float* col, int64_t ld) {
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t ki = 0; ki < g.kh; ++ki)
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        float* row = col + ((c * g.kh + ki) * g.kw + kj) * ld;
        const float* src = x + (c * g.h + ki) * g.w + kj;
        for (int64_t oy = 0; oy < g.oh; ++oy) copy_row(row + oy * g.ow, src + oy * g.w, g.ow);
      }
}

LS_SIMD_CLONES void col2im_s1p0(const ConvGeometry& g, const float* col, int64_t ld, float* x) {
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t ki = 0; ki < g.kh; ++ki)
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const float* row = col + ((c * g.kh + ki) * g.kw + kj) * ld;
        float* dst = x + (c * g.h + ki) * g.w + kj;
        for (int64_t oy = 0; oy < g.oh; ++oy) add_row(dst + oy * g.w, row + oy * g.ow, g.ow);
      }
}

bool simple(const ConvGeometry& g) { return g.stride == 1 && g.pad == 0 && g.ow >= 8; }

bool pointwise(const ConvGeometry& g) { return g.kh == 1 && g.kw == 1 && g.stride == 1 && g.pad == 0; }

// 1x1, stride 1, no padding: channel c's plane of P floats is row c. Chunks of
// several small images (resnet50's 4x4 and 2x2 stages) lower every image this
// way; the general loop spent its time on per-row bounds for rows of 2-4 floats.
LS_SIMD_CLONES void im2col_pointwise(const ConvGeometry& g, const float* x, float* col, int64_t ld) {
  const int64_t P = g.p();
  for (int64_t c = 0; c < g.c; ++c) {
    const float* src = x + c * P;
    float* dst = col + c * ld;
    if (P >= 8)
      copy_row(dst, src, P);
    else
      for (int64_t i = 0; i < P; ++i) dst[i] = src[i];
  }
}

LS_SIMD_CLONES void col2im_pointwise(const ConvGeometry& g, const float* col, int64_t ld, float* x) {
  const int64_t P = g.p();
  for (int64_t c = 0; c < g.c; ++c) add_row(x + c * P, col + c * ld, P);
}

}  // namespace

LS_SIMD_CLONES void im2col(const ConvGeometry& g, const float* x, float* col, int64_t ld) {
  if (pointwise(g)) return im2col_pointwise(g, x, col, ld);
  if (simple(g)) return im2col_s1p0(g, x, col, ld);
  for (int64_t c = 0; c < g.c; ++c) {
    const float* xc = x + c * g.h * g.w;
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        float* row = col + ((c * g.kh + ki) * g.kw + kj) * ld;
        // Output columns ow in [lo, hi) read inside the image: iw = ow*stride - pad + kj.
        int64_t lo = 0, hi = g.ow;
        if (g.stride == 1) {
          lo = std::clamp<int64_t>(g.pad - kj, 0, g.ow);
          hi = std::clamp<int64_t>(g.w + g.pad - kj, lo, g.ow);
        } else {
          while (lo < g.ow && lo * g.stride - g.pad + kj < 0) ++lo;
          hi = lo;
          while (hi < g.ow && hi * g.stride - g.pad + kj < g.w) ++hi;
        }
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          float* out = row + oy * g.ow;
          const int64_t iy = oy * g.stride - g.pad + ki;
          if (iy < 0 || iy >= g.h) {
            std::memset(out, 0, static_cast<size_t>(g.ow) * sizeof(float));
            continue;
          }
          const float* in = xc + iy * g.w;  // input row; column of ox is ox*stride - pad + kj
          for (int64_t ox = 0; ox < lo; ++ox) out[ox] = 0.f;
          if (g.stride == 1) {
            const float* src = in + (lo - g.pad + kj);  // rows are short: an inline loop beats memcpy
            for (int64_t ox = 0; ox < hi - lo; ++ox) out[lo + ox] = src[ox];
          } else {
            for (int64_t ox = lo; ox < hi; ++ox) out[ox] = in[ox * g.stride - g.pad + kj];
          }
          for (int64_t ox = hi; ox < g.ow; ++ox) out[ox] = 0.f;
        }
      }
    }
  }
}

LS_SIMD_CLONES void col2im(const ConvGeometry& g, const float* col, int64_t ld, float* x) {
  if (pointwise(g)) return col2im_pointwise(g, col, ld, x);
  if (simple(g)) return col2im_s1p0(g, col, ld, x);
  for (int64_t c = 0; c < g.c; ++c) {
    float* xc = x + c * g.h * g.w;
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const float* row = col + ((c * g.kh + ki) * g.kw + kj) * ld;
        int64_t lo = 0, hi = g.ow;
        while (lo < g.ow && lo * g.stride - g.pad + kj < 0) ++lo;
        hi = lo;
        while (hi < g.ow && hi * g.stride - g.pad + kj < g.w) ++hi;
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          const int64_t iy = oy * g.stride - g.pad + ki;
          if (iy < 0 || iy >= g.h) continue;
          const float* in = row + oy * g.ow;
          float* out = xc + iy * g.w;
          if (g.stride == 1) {
            float* dst = out + (lo - g.pad + kj);
            const float* src = in + lo;
            for (int64_t ox = 0; ox < hi - lo; ++ox) dst[ox] += src[ox];
          } else {
            for (int64_t ox = lo; ox < hi; ++ox) out[ox * g.stride - g.pad + kj] += in[ox];
          }
        }
      }
    }
  }
}

}  // namespace lockstep::ops
