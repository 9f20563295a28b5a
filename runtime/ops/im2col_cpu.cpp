// im2col/col2im with a fast path for stride 1 (contiguous row copies).
#include "ops/im2col.h"

#include <algorithm>
#include <cstring>

#include "ops/simd.h"

namespace lockstep::ops {

LS_SIMD_CLONES void im2col(const ConvGeometry& g, const float* x, float* col, int64_t ld) {
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
