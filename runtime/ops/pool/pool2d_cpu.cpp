// Pooling kernels. Planes are independent and split across threads; the common
// 2x2 stride-2 window has its own vectorisable path.
// NHWC (channels last): images are split across threads, and every kernel's
// innermost loop runs over the c contiguous channels of one pixel (vectorised).
// Each output is computed with the NCHW kernel's expression, in its order, so
// the two layouts agree bit for bit:
//   - max pooling compares the window in row-major order with strict > (the
//     first maximum wins); argmax is the index iy * w + ix within the plane,
//     stored [N, OH, OW, C];
//   - max-pool backward is a gather per input over the outputs whose window
//     covers it, in ascending output index, adding dy where argmax names the
//     input (and +0 elsewhere: a sum that starts at +0 is never -0, so adding
//     +0 changes nothing). That is the NCHW scatter's order of additions;
//   - average pooling sums the window in (ky, kx) order from 0 (2x2 stride 2:
//     0.25f * ((a + b) + (c + d))); backward scatters dy * inv in ascending
//     output order, the product rounded in a separate loop first (as the NCHW
//     code's per-output g), so no multiply-add can be fused;
//   - global average pooling sums in double over i = 0..hw-1 per channel.
#include "ops/pool/pool2d_cpu.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "core/error.h"
#include "ops/simd.h"

namespace lockstep::ops {
namespace {

constexpr int64_t kGrainElems = 1 << 15;
int64_t plane_grain(const Pool2dShape& s) { return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, s.h * s.w)); }

LS_SIMD_CLONES void avg2x2_fwd(const Pool2dShape& s, int64_t pb, int64_t pe, const float* x, float* y) {
  for (int64_t pl = pb; pl < pe; ++pl) {
    const float* xp = x + pl * s.h * s.w;
    float* yp = y + pl * s.oh * s.ow;
    for (int64_t oy = 0; oy < s.oh; ++oy) {
      const float* r0 = xp + 2 * oy * s.w;
      const float* r1 = r0 + s.w;
      float* out = yp + oy * s.ow;
      for (int64_t ox = 0; ox < s.ow; ++ox) out[ox] = 0.25f * ((r0[2 * ox] + r0[2 * ox + 1]) + (r1[2 * ox] + r1[2 * ox + 1]));
    }
  }
}

LS_SIMD_CLONES void avg2x2_bwd(const Pool2dShape& s, int64_t pb, int64_t pe, const float* dy, float* dx) {
  for (int64_t pl = pb; pl < pe; ++pl) {
    float* dxp = dx + pl * s.h * s.w;
    const float* dyp = dy + pl * s.oh * s.ow;
    for (int64_t iy = 0; iy < s.h; ++iy) {
      float* out = dxp + iy * s.w;
      const int64_t oy = iy / 2;
      if (oy >= s.oh) {  // rows past the last window (odd height) get no gradient
        std::fill_n(out, s.w, 0.f);
        continue;
      }
      const float* g = dyp + oy * s.ow;
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        const float v = 0.25f * g[ox];
        out[2 * ox] = v;
        out[2 * ox + 1] = v;
      }
      for (int64_t ix = 2 * s.ow; ix < s.w; ++ix) out[ix] = 0.f;
    }
  }
}

void avg_generic_fwd(const Pool2dShape& s, int64_t pb, int64_t pe, const float* x, float* y) {
  const float inv = 1.f / static_cast<float>(s.k * s.k);
  for (int64_t pl = pb; pl < pe; ++pl) {
    const float* xp = x + pl * s.h * s.w;
    float* yp = y + pl * s.oh * s.ow;
    for (int64_t oy = 0; oy < s.oh; ++oy)
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        float acc = 0.f;
        for (int64_t ky = 0; ky < s.k; ++ky) {
          const float* r = xp + (oy * s.stride + ky) * s.w + ox * s.stride;
          for (int64_t kx = 0; kx < s.k; ++kx) acc += r[kx];
        }
        yp[oy * s.ow + ox] = acc * inv;
      }
  }
}

void avg_generic_bwd(const Pool2dShape& s, int64_t pb, int64_t pe, const float* dy, float* dx) {
  const float inv = 1.f / static_cast<float>(s.k * s.k);
  for (int64_t pl = pb; pl < pe; ++pl) {
    float* dxp = dx + pl * s.h * s.w;
    std::fill_n(dxp, s.h * s.w, 0.f);
    const float* dyp = dy + pl * s.oh * s.ow;
    for (int64_t oy = 0; oy < s.oh; ++oy)
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        const float g = dyp[oy * s.ow + ox] * inv;
        for (int64_t ky = 0; ky < s.k; ++ky) {
          float* r = dxp + (oy * s.stride + ky) * s.w + ox * s.stride;
          for (int64_t kx = 0; kx < s.k; ++kx) r[kx] += g;
        }
      }
  }
}

LS_SIMD_CLONES void max2x2_fwd(const Pool2dShape& s, int64_t pb, int64_t pe, const float* x, float* y, int32_t* am) {
  const int32_t w = static_cast<int32_t>(s.w);
  for (int64_t pl = pb; pl < pe; ++pl) {
    const float* xp = x + pl * s.h * s.w;
    float* yp = y + pl * s.oh * s.ow;
    int32_t* ap = am + pl * s.oh * s.ow;
    for (int64_t oy = 0; oy < s.oh; ++oy) {
      const int32_t base = static_cast<int32_t>(2 * oy * s.w);
      const float* r0 = xp + base;
      const float* r1 = r0 + s.w;
      float* yo = yp + oy * s.ow;
      int32_t* ao = ap + oy * s.ow;
      // Branch-free selects (vectorisable); the first maximum in window order
      // wins ties, as in the generic path.
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        const int32_t c = base + static_cast<int32_t>(2 * ox);
        const float a = r0[2 * ox], b = r0[2 * ox + 1], d = r1[2 * ox], e = r1[2 * ox + 1];
        float m = a;
        int32_t i = c;
        i = b > m ? c + 1 : i;
        m = b > m ? b : m;
        i = d > m ? c + w : i;
        m = d > m ? d : m;
        i = e > m ? c + w + 1 : i;
        m = e > m ? e : m;
        yo[ox] = m;
        ao[ox] = i;
      }
    }
  }
}

void max_generic_fwd(const Pool2dShape& s, int64_t pb, int64_t pe, const float* x, float* y, int32_t* am) {
  for (int64_t pl = pb; pl < pe; ++pl) {
    const float* xp = x + pl * s.h * s.w;
    float* yp = y + pl * s.oh * s.ow;
    int32_t* ap = am + pl * s.oh * s.ow;
    for (int64_t oy = 0; oy < s.oh; ++oy)
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        // The window clipped to the input (padding never wins).
        const int64_t y0 = std::max<int64_t>(oy * s.stride - s.pad, 0), y1 = std::min(oy * s.stride - s.pad + s.k, s.h);
        const int64_t x0 = std::max<int64_t>(ox * s.stride - s.pad, 0), x1 = std::min(ox * s.stride - s.pad + s.k, s.w);
        int64_t bi = y0 * s.w + x0;
        float best = xp[bi];
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix)
            if (xp[iy * s.w + ix] > best) { best = xp[iy * s.w + ix]; bi = iy * s.w + ix; }
        yp[oy * s.ow + ox] = best;
        ap[oy * s.ow + ox] = static_cast<int32_t>(bi);
      }
  }
}

// ---- NHWC: x [n, h, w, c] -> y [n, oh, ow, c]; images [nb, ne) ----

int64_t image_grain(const Pool2dShape& s) {
  return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, s.h * s.w * s.c));
}

// Number of images; checks the channel count.
int64_t nhwc_images(const Pool2dShape& s, const char* op) {
  LS_CHECK(s.c >= 1 && s.planes >= 0 && s.planes % s.c == 0,
           "{} (nhwc): {} planes are not a whole number of images of {} channels", op, s.planes, s.c);
  return s.planes / s.c;
}

// Outputs o (along one axis) whose window [o*stride - pad, o*stride - pad + k)
// covers input coordinate i: [first, last] (empty when first > last).
void covering(int64_t i, int64_t k, int64_t stride, int64_t pad, int64_t n, int64_t& first, int64_t& last) {
  const int64_t lo = i + pad - k + 1;
  first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  last = std::min(n - 1, (i + pad) / stride);
}

LS_SIMD_CLONES void max_nhwc_fwd(const Pool2dShape& s, int64_t nb, int64_t ne, const float* x, float* y,
                                 int32_t* am) {
  const int64_t C = s.c;
  for (int64_t n = nb; n < ne; ++n) {
    const float* xn = x + n * s.h * s.w * C;
    float* yn = y + n * s.oh * s.ow * C;
    int32_t* an = am + n * s.oh * s.ow * C;
    for (int64_t oy = 0; oy < s.oh; ++oy)
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        // The window clipped to the input (padding never wins).
        const int64_t y0 = std::max<int64_t>(oy * s.stride - s.pad, 0), y1 = std::min(oy * s.stride - s.pad + s.k, s.h);
        const int64_t x0 = std::max<int64_t>(ox * s.stride - s.pad, 0), x1 = std::min(ox * s.stride - s.pad + s.k, s.w);
        float* __restrict yo = yn + (oy * s.ow + ox) * C;
        int32_t* __restrict ao = an + (oy * s.ow + ox) * C;
        const int32_t i0 = static_cast<int32_t>(y0 * s.w + x0);
        const float* __restrict x0p = xn + i0 * C;
        for (int64_t c = 0; c < C; ++c) {
          yo[c] = x0p[c];
          ao[c] = i0;
        }
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) {
            const int32_t i = static_cast<int32_t>(iy * s.w + ix);
            const float* __restrict xp = xn + i * C;
            for (int64_t c = 0; c < C; ++c) {  // branch-free: strict >, so the first maximum stays
              const float v = xp[c];
              const bool gt = v > yo[c];
              ao[c] = gt ? i : ao[c];
              yo[c] = gt ? v : yo[c];
            }
          }
      }
  }
}

LS_SIMD_CLONES void max_nhwc_bwd(const Pool2dShape& s, int64_t nb, int64_t ne, const float* dy, const int32_t* am,
                                 float* dx) {
  const int64_t C = s.c;
  for (int64_t n = nb; n < ne; ++n) {
    float* dxn = dx + n * s.h * s.w * C;
    const float* dyn = dy + n * s.oh * s.ow * C;
    const int32_t* an = am + n * s.oh * s.ow * C;
    for (int64_t iy = 0; iy < s.h; ++iy) {
      int64_t oy0, oy1;
      covering(iy, s.k, s.stride, s.pad, s.oh, oy0, oy1);
      for (int64_t ix = 0; ix < s.w; ++ix) {
        int64_t ox0, ox1;
        covering(ix, s.k, s.stride, s.pad, s.ow, ox0, ox1);
        const int32_t i = static_cast<int32_t>(iy * s.w + ix);
        float* __restrict d = dxn + i * C;
        std::fill_n(d, C, 0.f);
        for (int64_t oy = oy0; oy <= oy1; ++oy)
          for (int64_t ox = ox0; ox <= ox1; ++ox) {
            const int64_t o = (oy * s.ow + ox) * C;
            const float* __restrict g = dyn + o;
            const int32_t* __restrict a = an + o;
            for (int64_t c = 0; c < C; ++c) d[c] += a[c] == i ? g[c] : 0.f;
          }
      }
    }
  }
}

LS_SIMD_CLONES void avg2x2_nhwc_fwd(const Pool2dShape& s, int64_t nb, int64_t ne, const float* x, float* y) {
  const int64_t C = s.c, row = s.w * C;
  for (int64_t n = nb; n < ne; ++n) {
    const float* xn = x + n * s.h * row;
    float* yn = y + n * s.oh * s.ow * C;
    for (int64_t oy = 0; oy < s.oh; ++oy)
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        const float* __restrict r0 = xn + 2 * oy * row + 2 * ox * C;  // (2oy, 2ox); +C: (2oy, 2ox+1)
        const float* __restrict r1 = r0 + row;                         // (2oy+1, 2ox)
        float* __restrict out = yn + (oy * s.ow + ox) * C;
        for (int64_t c = 0; c < C; ++c) out[c] = 0.25f * ((r0[c] + r0[C + c]) + (r1[c] + r1[C + c]));
      }
  }
}

LS_SIMD_CLONES void avg2x2_nhwc_bwd(const Pool2dShape& s, int64_t nb, int64_t ne, const float* dy, float* dx) {
  const int64_t C = s.c, row = s.w * C;
  for (int64_t n = nb; n < ne; ++n) {
    float* dxn = dx + n * s.h * row;
    const float* dyn = dy + n * s.oh * s.ow * C;
    for (int64_t iy = 0; iy < s.h; ++iy) {
      float* out = dxn + iy * row;
      const int64_t oy = iy / 2;
      if (oy >= s.oh) {  // rows past the last window (odd height) get no gradient
        std::fill_n(out, row, 0.f);
        continue;
      }
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        const float* __restrict g = dyn + (oy * s.ow + ox) * C;
        float* __restrict o0 = out + 2 * ox * C;
        float* __restrict o1 = o0 + C;
        for (int64_t c = 0; c < C; ++c) {
          const float v = 0.25f * g[c];
          o0[c] = v;
          o1[c] = v;
        }
      }
      std::fill(out + 2 * s.ow * C, out + row, 0.f);
    }
  }
}

LS_SIMD_CLONES void avg_generic_nhwc_fwd(const Pool2dShape& s, int64_t nb, int64_t ne, const float* x, float* y) {
  const float inv = 1.f / static_cast<float>(s.k * s.k);
  const int64_t C = s.c;
  for (int64_t n = nb; n < ne; ++n) {
    const float* xn = x + n * s.h * s.w * C;
    float* yn = y + n * s.oh * s.ow * C;
    for (int64_t oy = 0; oy < s.oh; ++oy)
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        float* __restrict acc = yn + (oy * s.ow + ox) * C;
        std::fill_n(acc, C, 0.f);
        for (int64_t ky = 0; ky < s.k; ++ky)
          for (int64_t kx = 0; kx < s.k; ++kx) {
            const float* __restrict r = xn + ((oy * s.stride + ky) * s.w + ox * s.stride + kx) * C;
            for (int64_t c = 0; c < C; ++c) acc[c] += r[c];
          }
        for (int64_t c = 0; c < C; ++c) acc[c] = acc[c] * inv;
      }
  }
}

// g: scratch for one output pixel's C gradients.
LS_SIMD_CLONES void avg_generic_nhwc_bwd(const Pool2dShape& s, int64_t nb, int64_t ne, const float* dy, float* dx,
                                         float* g) {
  const float inv = 1.f / static_cast<float>(s.k * s.k);
  const int64_t C = s.c;
  for (int64_t n = nb; n < ne; ++n) {
    float* dxn = dx + n * s.h * s.w * C;
    std::fill_n(dxn, s.h * s.w * C, 0.f);
    const float* dyn = dy + n * s.oh * s.ow * C;
    for (int64_t oy = 0; oy < s.oh; ++oy)
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        const float* __restrict gy = dyn + (oy * s.ow + ox) * C;
        for (int64_t c = 0; c < C; ++c) g[c] = gy[c] * inv;  // rounded here, added below (never fused)
        for (int64_t ky = 0; ky < s.k; ++ky)
          for (int64_t kx = 0; kx < s.k; ++kx) {
            float* __restrict r = dxn + ((oy * s.stride + ky) * s.w + ox * s.stride + kx) * C;
            for (int64_t c = 0; c < C; ++c) r[c] += g[c];
          }
      }
  }
}

}  // namespace

void maxpool2d_forward_cpu(const Pool2dShape& s, const float* x, float* y, int32_t* argmax) {
  if (s.layout == Layout::NHWC) {
    parallel_for(nhwc_images(s, "maxpool2d_forward"), image_grain(s),
                 [&](int64_t b, int64_t e) { max_nhwc_fwd(s, b, e, x, y, argmax); });
    return;
  }
  const bool fast = s.k == 2 && s.stride == 2 && s.pad == 0;
  parallel_for(s.planes, plane_grain(s), [&](int64_t b, int64_t e) {
    fast ? max2x2_fwd(s, b, e, x, y, argmax) : max_generic_fwd(s, b, e, x, y, argmax);
  });
}

void maxpool2d_backward_cpu(const Pool2dShape& s, const float* dy, const int32_t* argmax, float* dx) {
  if (s.layout == Layout::NHWC) {
    parallel_for(nhwc_images(s, "maxpool2d_backward"), image_grain(s),
                 [&](int64_t b, int64_t e) { max_nhwc_bwd(s, b, e, dy, argmax, dx); });
    return;
  }
  parallel_for(s.planes, plane_grain(s), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      float* dxp = dx + pl * s.h * s.w;
      std::fill_n(dxp, s.h * s.w, 0.f);
      const float* dyp = dy + pl * s.oh * s.ow;
      const int32_t* ap = argmax + pl * s.oh * s.ow;
      for (int64_t i = 0; i < s.oh * s.ow; ++i) dxp[ap[i]] += dyp[i];
    }
  });
}

void avgpool2d_forward_cpu(const Pool2dShape& s, const float* x, float* y) {
  const bool fast = s.k == 2 && s.stride == 2;
  if (s.layout == Layout::NHWC) {
    parallel_for(nhwc_images(s, "avgpool2d_forward"), image_grain(s), [&](int64_t b, int64_t e) {
      fast ? avg2x2_nhwc_fwd(s, b, e, x, y) : avg_generic_nhwc_fwd(s, b, e, x, y);
    });
    return;
  }
  parallel_for(s.planes, plane_grain(s), [&](int64_t b, int64_t e) {
    fast ? avg2x2_fwd(s, b, e, x, y) : avg_generic_fwd(s, b, e, x, y);
  });
}

void avgpool2d_backward_cpu(const Pool2dShape& s, const float* dy, float* dx) {
  const bool fast = s.k == 2 && s.stride == 2;
  if (s.layout == Layout::NHWC) {
    const int64_t images = nhwc_images(s, "avgpool2d_backward");
    if (fast) {
      parallel_for(images, image_grain(s), [&](int64_t b, int64_t e) { avg2x2_nhwc_bwd(s, b, e, dy, dx); });
      return;
    }
    // One scratch row of c gradients per thread (allocated before the parallel
    // region: the workers must not throw).
    const int threads = compute_threads(images, image_grain(s));
    std::vector<float> scratch(static_cast<size_t>(threads * s.c));
    parallel_ranges(threads, images, [&](int t, int64_t b, int64_t e) {
      avg_generic_nhwc_bwd(s, b, e, dy, dx, scratch.data() + t * s.c);
    });
    return;
  }
  parallel_for(s.planes, plane_grain(s), [&](int64_t b, int64_t e) {
    fast ? avg2x2_bwd(s, b, e, dy, dx) : avg_generic_bwd(s, b, e, dy, dx);
  });
}

void global_avgpool_forward_cpu(int64_t planes, int64_t hw, const float* x, float* y) {
  const double inv = 1.0 / static_cast<double>(hw);
  parallel_for(planes, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, hw)), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      double acc = 0;
      const float* xp = x + p * hw;
      for (int64_t i = 0; i < hw; ++i) acc += xp[i];
      y[p] = static_cast<float>(acc * inv);
    }
  });
}

void global_avgpool_backward_cpu(int64_t planes, int64_t hw, const float* dy, float* dx) {
  const float inv = 1.f / static_cast<float>(hw);
  parallel_for(planes, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, hw)), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) std::fill_n(dx + p * hw, hw, dy[p] * inv);
  });
}

void global_avgpool_nhwc_forward_cpu(int64_t n, int64_t c, int64_t hw, const float* x, float* y) {
  LS_CHECK(n >= 0 && c >= 0 && hw >= 0, "global_avgpool_nhwc_forward: invalid shape n={} c={} hw={}", n, c, hw);
  if (n == 0 || c == 0) return;
  const double inv = 1.0 / static_cast<double>(hw);
  // Per-thread double accumulators for one image's c channels (allocated
  // before the parallel region: the workers must not throw).
  const int threads = compute_threads(n, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, hw * c)));
  std::vector<double> scratch(static_cast<size_t>(threads * c));
  parallel_ranges(threads, n, [&](int t, int64_t b, int64_t e) {
    double* __restrict acc = scratch.data() + t * c;
    for (int64_t img = b; img < e; ++img) {
      std::fill_n(acc, c, 0.0);
      const float* xn = x + img * hw * c;
      for (int64_t i = 0; i < hw; ++i) {
        const float* __restrict xp = xn + i * c;
        for (int64_t ch = 0; ch < c; ++ch) acc[ch] += xp[ch];
      }
      float* __restrict yn = y + img * c;
      for (int64_t ch = 0; ch < c; ++ch) yn[ch] = static_cast<float>(acc[ch] * inv);
    }
  });
}

void global_avgpool_nhwc_backward_cpu(int64_t n, int64_t c, int64_t hw, const float* dy, float* dx) {
  LS_CHECK(n >= 0 && c >= 0 && hw >= 0, "global_avgpool_nhwc_backward: invalid shape n={} c={} hw={}", n, c, hw);
  if (n == 0 || c == 0) return;
  const float inv = 1.f / static_cast<float>(hw);
  parallel_for(n, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, hw * c)), [&](int64_t b, int64_t e) {
    for (int64_t img = b; img < e; ++img) {
      const float* __restrict g = dy + img * c;
      for (int64_t i = 0; i < hw; ++i) {
        float* __restrict d = dx + (img * hw + i) * c;
        for (int64_t ch = 0; ch < c; ++ch) d[ch] = g[ch] * inv;
      }
    }
  });
}

}  // namespace lockstep::ops
