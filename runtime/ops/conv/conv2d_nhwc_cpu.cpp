// Conv2d on the CPU for channels-last tensors: im2col + OpenBLAS sgemm per
// chunk of nb images (conv2d_chunk, as NCHW), the NHWC twin of conv2d_cpu.cpp
// (same threading model).
//   x, dx  [N, H, W, C]        y, dy  [N, OH, OW, OC]        P = OH*OW, K = KH*KW*C
//   w, dw  [OC, C, KH, KW]     b, db  [OC]                   (canonical layouts)
//   Wp     [OC, KH, KW, C]     the weight permuted once per call (ws.shared)
//   col    [nb*P, K]           one row per output pixel, K ordered (kh, kw, c):
//                              KH*KW runs of C contiguous floats (zeros for padding)
// A chunk's output rows are contiguous in y ([nb*P, OC]), so the GEMMs write
// into y and read dy in place: no staging copies for any nb.
//   forward   y[nb*P, OC]     = col · Wp^T (+ b per row, then the optional ReLU)
//   backward  dWp[OC, K]     += dY^T · col,  db += column sums of dY,
//             dcol[nb*P, K]   = dY · Wp, then col2im adds dcol into dx
// A 1x1 stride-1 unpadded kernel needs no im2col: x itself is col ([N*H*W, C])
// and dx is dcol.
// Every thread accumulates dWp/db into its own partial; the partials are added
// in thread order after the parallel region (deterministic for a given thread
// count) and permuted into the canonical dw.
#include <algorithm>
#include <cstring>

#include "ops/conv/conv2d_cpu.h"
#include "ops/elementwise/elementwise_cpu.h"
#include "ops/gemm/gemm.h"
#include "ops/layout/layout_cpu.h"
#include "ops/simd.h"

namespace lockstep::ops {
namespace {
bool pointwise(const ConvGeometry& g) { return g.kh == 1 && g.kw == 1 && g.stride == 1 && g.pad == 0; }

// Floats one thread needs for col (none in the pointwise case).
int64_t col_floats(const Conv2dShape& s, int64_t nb) { return pointwise(s.g) ? 0 : nb * s.g.p() * s.g.k(); }

// For output column ox: the window's first input column ix0 = ox*stride - pad,
// and the kernel columns kj in [lo, hi) whose input column ix0 + kj is inside
// the image (lo == hi when none is).
struct KjRange {
  int64_t ix0, lo, hi;
};
LS_INLINE KjRange kj_range(const ConvGeometry& g, int64_t ox) {
  const int64_t ix0 = ox * g.stride - g.pad;
  const int64_t lo = std::clamp<int64_t>(-ix0, 0, g.kw);
  return {ix0, lo, std::clamp<int64_t>(g.w - ix0, lo, g.kw)};
}

// col[P, K] (row stride K) from one image x[H, W, C]. For each (oy, ox, ki) the
// KW*C floats of a kernel row are one contiguous run in x, clipped at the edges.
LS_SIMD_CLONES void im2col_nhwc(const ConvGeometry& g, const float* x, float* col) {
  const int64_t C = g.c, K = g.k(), run = g.kw * C;
  for (int64_t oy = 0; oy < g.oh; ++oy)
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      float* row = col + (oy * g.ow + ox) * K;
      const KjRange r = kj_range(g, ox);
      for (int64_t ki = 0; ki < g.kh; ++ki) {
        float* dst = row + ki * run;
        const int64_t iy = oy * g.stride - g.pad + ki;
        if (iy < 0 || iy >= g.h) {
          std::fill_n(dst, run, 0.f);
          continue;
        }
        std::fill_n(dst, r.lo * C, 0.f);
        if (r.hi > r.lo)
          std::memcpy(dst + r.lo * C, x + (iy * g.w + r.ix0 + r.lo) * C,
                      static_cast<size_t>((r.hi - r.lo) * C) * sizeof(float));
        std::fill_n(dst + r.hi * C, (g.kw - r.hi) * C, 0.f);
      }
    }
}

// The adjoint: adds col[P, K] into one image dx[H, W, C] (the caller zeroes it).
LS_SIMD_CLONES void col2im_nhwc(const ConvGeometry& g, const float* col, float* dx) {
  const int64_t C = g.c, K = g.k(), run = g.kw * C;
  for (int64_t oy = 0; oy < g.oh; ++oy)
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      const float* row = col + (oy * g.ow + ox) * K;
      const KjRange r = kj_range(g, ox);
      for (int64_t ki = 0; ki < g.kh; ++ki) {
        const int64_t iy = oy * g.stride - g.pad + ki;
        if (iy < 0 || iy >= g.h) continue;
        const float* src = row + ki * run + r.lo * C;
        float* dst = dx + (iy * g.w + r.ix0 + r.lo) * C;
        const int64_t n = (r.hi - r.lo) * C;
        for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
      }
    }
}

void forward_range(const Conv2dShape& s, int64_t n_begin, int64_t n_end, int64_t nb_max, const float* x,
                   const float* wp, const float* b, float* y, bool relu, float* col) {
  const ConvGeometry& g = s.g;
  const int64_t K = g.k(), P = g.p(), in_img = g.h * g.w * g.c, out_img = P * s.oc;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += nb_max) {
    const int64_t nb = std::min(nb_max, n_end - n0), rows = nb * P;
    const float* A = x + n0 * in_img;  // [rows, K]
    if (!pointwise(g)) {
      for (int64_t j = 0; j < nb; ++j) im2col_nhwc(g, x + (n0 + j) * in_img, col + j * P * K);
      A = col;
    }
    float* yc = y + n0 * out_img;  // [rows, OC]
    if (b)
      for (int64_t r = 0; r < rows; ++r) std::copy_n(b, s.oc, yc + r * s.oc);
    // y[rows, OC] = col[rows, K] · Wp[OC, K]^T; beta 1: bias already in y.
    sgemm(Trans::N, Trans::T, rows, s.oc, K, 1.f, A, K, wp, K, b ? 1.f : 0.f, yc, s.oc);
    if (relu) relu_forward_serial(rows * s.oc, yc, yc);
  }
}

// Accumulates dWp [OC, K] and db [OC] (nullable) into the partials dwp/db, and
// writes dx (nullable).
void backward_range(const Conv2dShape& s, int64_t n_begin, int64_t n_end, int64_t nb_max, const float* x,
                    const float* wp, const float* y, float* dy, float* dx, float* dwp, float* db, bool relu,
                    float* col) {
  const ConvGeometry& g = s.g;
  const int64_t K = g.k(), P = g.p(), in_img = g.h * g.w * g.c, out_img = P * s.oc;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += nb_max) {
    const int64_t nb = std::min(nb_max, n_end - n0), rows = nb * P;
    float* dY = dy + n0 * out_img;  // [rows, OC]
    if (relu) relu_backward_serial(rows * s.oc, y + n0 * out_img, dY, dY);
    if (db)
      for (int64_t r = 0; r < rows; ++r) add_inplace_serial(s.oc, dY + r * s.oc, db);
    const float* A = x + n0 * in_img;  // [rows, K]
    if (!pointwise(g)) {
      for (int64_t j = 0; j < nb; ++j) im2col_nhwc(g, x + (n0 + j) * in_img, col + j * P * K);
      A = col;
    }
    // dWp[OC, K] += dY[rows, OC]^T · col[rows, K]
    sgemm(Trans::T, Trans::N, s.oc, K, rows, 1.f, dY, s.oc, A, K, 1.f, dwp, K);
    if (!dx) continue;
    float* dxc = dx + n0 * in_img;
    // dcol[rows, K] = dY[rows, OC] · Wp[OC, K]: straight into dx when pointwise,
    // else into col (free again) and scattered by col2im.
    sgemm(Trans::N, Trans::N, rows, K, s.oc, 1.f, dY, s.oc, wp, K, 0.f, pointwise(g) ? dxc : col, K);
    if (pointwise(g)) continue;
    std::fill_n(dxc, nb * in_img, 0.f);
    for (int64_t j = 0; j < nb; ++j) col2im_nhwc(g, col + j * P * K, dxc + j * in_img);
  }
}

}  // namespace

void conv2d_nhwc_forward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* b, float* y,
                             bool relu, Workspace& ws) {
  const ConvGeometry& g = s.g;
  const int64_t nb = conv2d_chunk(s);
  const int threads = compute_threads(s.n, 1);
  float* wp = ws.shared(s.oc * g.k());
  nchw_to_nhwc_cpu(s.oc, g.c, g.kh * g.kw, w, wp);
  ws.reserve(threads, col_floats(s, nb));
  parallel_ranges(threads, s.n, [&](int t, int64_t n0, int64_t n1) {
    forward_range(s, n0, n1, nb, x, wp, b, y, relu, ws.floats(t));
  });
}

void conv2d_nhwc_backward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* y, float* dy,
                              float* dx, float* dw, float* db, bool accumulate, bool relu, Workspace& ws) {
  const ConvGeometry& g = s.g;
  const int64_t nb = conv2d_chunk(s), K = g.k(), KK = g.kh * g.kw;
  const int threads = compute_threads(s.n, 1);
  float* wp = ws.shared(s.oc * K);
  nchw_to_nhwc_cpu(s.oc, g.c, KK, w, wp);
  // Per thread: col, then a partial dWp [OC, K] and db [OC].
  const int64_t scratch = col_floats(s, nb), partial = s.oc * K + s.oc;
  ws.reserve(threads, scratch + partial);
  if (s.n <= 0) std::fill_n(ws.floats(0) + scratch, partial, 0.f);  // the region runs no thread
  parallel_ranges(threads, s.n, [&](int t, int64_t n0, int64_t n1) {
    float* buf = ws.floats(t);
    float* pdw = buf + scratch;
    std::fill_n(pdw, partial, 0.f);
    backward_range(s, n0, n1, nb, x, wp, y, dy, dx, pdw, db ? pdw + s.oc * K : nullptr, relu, buf);
  });
  float* sum = ws.floats(0) + scratch;  // [OC, KH, KW, C] then [OC]
  for (int t = 1; t < threads; ++t) add_inplace_serial(partial, ws.floats(t) + scratch, sum);
  if (accumulate) {
    nhwc_to_nchw_cpu(s.oc, g.c, KK, sum, wp);  // Wp is no longer needed
    add_inplace_serial(s.oc * K, wp, dw);
  } else {
    nhwc_to_nchw_cpu(s.oc, g.c, KK, sum, dw);
  }
  if (db)
    for (int64_t oc = 0; oc < s.oc; ++oc) db[oc] = (accumulate ? db[oc] : 0.f) + sum[s.oc * K + oc];
}

}  // namespace lockstep::ops
