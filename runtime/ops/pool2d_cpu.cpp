// Pooling kernels. Planes are independent and split across threads; the common
// 2x2 stride-2 window has its own vectorisable path.
#include "ops/pool2d.h"

#include <algorithm>
#include <limits>

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

}  // namespace

void maxpool2d_forward_cpu(const Pool2dShape& s, const float* x, float* y, int32_t* argmax) {
  const bool fast = s.k == 2 && s.stride == 2 && s.pad == 0;
  parallel_for(s.planes, plane_grain(s), [&](int64_t b, int64_t e) {
    fast ? max2x2_fwd(s, b, e, x, y, argmax) : max_generic_fwd(s, b, e, x, y, argmax);
  });
}

void maxpool2d_backward_cpu(const Pool2dShape& s, const float* dy, const int32_t* argmax, float* dx) {
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
  parallel_for(s.planes, plane_grain(s), [&](int64_t b, int64_t e) {
    fast ? avg2x2_fwd(s, b, e, x, y) : avg_generic_fwd(s, b, e, x, y);
  });
}

void avgpool2d_backward_cpu(const Pool2dShape& s, const float* dy, float* dx) {
  const bool fast = s.k == 2 && s.stride == 2;
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

}  // namespace lockstep::ops
