// Winograd F(m x m, r x r) convolution for 3x3 (m = 4 or 2) and 5x5 (m = 2)
// stride-1 layers (CPU).
//
// An alpha x alpha input tile d gives an m x m output tile (matrices in
// winograd_matrices.h, alpha = m + r - 1, P = alpha^2 "planes"):
//   Y = AT [ (G g G^T) .* (BT d BT^T) ] AT^T
// Summing over channels turns the P elementwise products into P GEMMs, stored
// tile-major (t = tile, c = channel, oc = output channel):
//   forward  M[xi] (T x OC) = V[xi] (T x C) * U[xi]^T (C x OC)   U = G g G^T,  V = BT d BT^T
//   dgrad    Z[xi] (T x C)  = W[xi] (T x OC) * U[xi] (OC x C)    W = AT^T dy AT, dx tile = BT^T Z BT
//   wgrad    S[xi] (OC x C) = sum over tiles of W[xi]^T * V[xi]  dW = G^T S G
// (dgrad and wgrad are derivatives of the same trilinear form, so they share
// its transforms.) Multiplies per output: F(4x4, 3x3): 36/16 vs 9 (4x fewer);
// F(2x2, 3x3): 16/4 vs 9 (2.25x); F(2x2, 5x5): 36/4 vs 25 (2.8x).
//
// Tiles start at (m ti - pad, m tj - pad); reads outside the image are zero and
// writes outside it are dropped. Chunk tiles are numbered t = img * T + ti * tw + tj.
// Layouts, chosen so every transform is 8-wide vector code and every product
// is a row-major GEMM sgemm_small runs without packing:
//   V, Z: [xi][t][Cp] and M, W: [xi][t][OCp] — each transform handles 8
//     channels at a time through a zero-padded, channel-interleaved copy of an
//     image plane (NCHW rows transposed 8x8), so a tile's values for 8
//     channels are contiguous 8-float loads and stores. Channel counts are
//     padded to multiples of 8 (Cp, OCp) with zeros.
//   U: [xi][OC][Cp] (dgrad's B) and its transpose Ut: [xi][Cp][OCp] (forward's B).
#include <algorithm>
#include <cstring>

#include "ops/conv/conv2d_cpu.h"
#include "ops/elementwise/elementwise_cpu.h"
#include "ops/gemm/gemm.h"
#include "ops/simd.h"
#include "ops/conv/winograd_matrices.h"

namespace lockstep::ops {
namespace {


template <int R, int Mo>
struct Wino {
  static constexpr int O = Mo;          // output tile side
  static constexpr int A = Mo + R - 1;  // input tile side
  static constexpr int P = A * A;       // transform planes
  static constexpr winograd::Matrices<R, Mo> M = winograd::make_matrices<R, Mo>();
};

template <typename V>
LS_INLINE V zero_of() {
  if constexpr (sizeof(V) == sizeof(float)) return 0.f;
  else return splat8(0.f);
}

// y (RO x CO) = L (RO x RI) * x (RI x CI) * Rm^T (Rm is CO x CI), all row-major.
// The matrices are compile-time constants: after unrolling, zero terms vanish
// and +-1 coefficients become adds and subtracts.
template <int RO, int RI, int CO, int CI, typename V, typename ML, typename MR>
LS_INLINE void sandwich(const ML& L, const MR& Rm, const V* x, V* y) {
  V t[RO * CI];
#pragma GCC unroll 8
  for (int a = 0; a < RO; ++a)
#pragma GCC unroll 8
    for (int j = 0; j < CI; ++j) {
      V acc = zero_of<V>();
      bool any = false;
#pragma GCC unroll 8
      for (int i = 0; i < RI; ++i) {
        const float c = static_cast<float>(L[a][i]);
        if (c == 0.f) continue;
        acc = any ? acc + c * x[i * CI + j] : c * x[i * CI + j];
        any = true;
      }
      t[a * CI + j] = acc;
    }
#pragma GCC unroll 8
  for (int a = 0; a < RO; ++a)
#pragma GCC unroll 8
    for (int b = 0; b < CO; ++b) {
      V acc = zero_of<V>();
      bool any = false;
#pragma GCC unroll 8
      for (int j = 0; j < CI; ++j) {
        const float c = static_cast<float>(Rm[b][j]);
        if (c == 0.f) continue;
        acc = any ? acc + c * t[a * CI + j] : c * t[a * CI + j];
        any = true;
      }
      y[a * CO + b] = acc;
    }
}

struct Tiles {
  int64_t th, tw, per_image;  // tile rows, tile columns, tiles per image
  int64_t pw, ph;             // padded plane: tile (ti, tj) reads rows [2ti, 2ti+A), columns [2tj, 2tj+A)
};

// Tiles of m x m outputs.
Tiles tiles_of(const Conv2dShape& s, int m) {
  Tiles t;
  t.th = (s.g.oh + m - 1) / m;
  t.tw = (s.g.ow + m - 1) / m;
  t.per_image = t.th * t.tw;
  t.pw = m * t.tw + s.g.kw - 1;  // >= OW + k - 1 = W + 2 pad: the plane holds the whole image
  t.ph = m * t.th + s.g.kh - 1;
  return t;
}

int64_t padded_channels(int64_t c) { return (c + 7) / 8 * 8; }

// Distance between the planes of a transform buffer holding n floats each.
// Padded past a multiple of 4 KiB: planes 4 KiB apart would all map to the
// same L1 sets and evict each other on every access.
int64_t plane_stride(int64_t n) { return (n + 15) / 16 * 16 + 16; }

// Images per chunk: about 128 tiles, with transform buffers up to 1 MB, so a
// chunk's V and M planes stay near L2 between the transforms and the products
// (resnet20 732 -> 788 img/s against the earlier 512 tiles and 4 MB). Where
// the products go to OpenBLAS (over 128 channels), which packs a whole OC x C
// plane of U on every call, 128 tiles whatever the buffers' size: the 1 MB
// rule had left resnet50's 256- and 512-channel layers at 224x224 with
// chunks of 16 tiles, 1.3-1.7x slower. Figures: docs/benchmarks.md.
int64_t chunk_images(const Conv2dShape& s, const Tiles& t, int planes) {
  const int64_t Cp = padded_channels(s.g.c), OCp = padded_channels(s.oc);
  const int64_t per_image = std::max<int64_t>(t.per_image, 1);
  int64_t images = (128 + per_image - 1) / per_image;
  if (sgemm_small_uses_kernel(Trans::N, 1, OCp, s.g.c))  // products unpacked: the cache bound applies
    images = std::min(images, (int64_t{1} << 18) / (planes * (Cp + OCp) * per_image));
  return std::clamp<int64_t>(images, 1, std::max<int64_t>(s.n, 1));
}

struct Scratch {
  float* V;   // P planes of [T][Cp] (stride plane_stride(Cp*T)): input transforms, later Z
  float* M;   // P planes of [T][OCp] (stride plane_stride(OCp*T)): forward products / dy transforms
  float* p8;  // padded, channel-interleaved plane: ph x pw x 8
  float* S;   // P planes of [OC][Cp] + [OC]: this thread's weight-gradient sums and db
};

int64_t scratch_floats(const Conv2dShape& s, const Tiles& tl, int64_t nb, int planes) {
  const int64_t T = nb * tl.per_image, Cp = padded_channels(s.g.c), OCp = padded_channels(s.oc);
  return planes * (plane_stride(Cp * T) + plane_stride(OCp * T)) + tl.ph * tl.pw * 8 + planes * s.oc * Cp + s.oc;
}

Scratch carve(float* p, const Conv2dShape& s, const Tiles& tl, int64_t nb, int planes) {
  const int64_t T = nb * tl.per_image, Cp = padded_channels(s.g.c), OCp = padded_channels(s.oc);
  Scratch sc;
  sc.V = p;
  p += planes * plane_stride(Cp * T);
  sc.M = p;
  p += planes * plane_stride(OCp * T);
  sc.p8 = p;
  p += tl.ph * tl.pw * 8;
  sc.S = p;
  return sc;
}

// Output channels per thread in the filter transforms below (each (oc, c) pair
// is independent, so the split changes no result).
constexpr int64_t kMinFilterRows = 8;

// Floats of the filter transforms U and Ut (one shared workspace buffer, U first).
template <int R, int Mo>
int64_t filter_floats(const Conv2dShape& s) {
  return 2 * Wino<R, Mo>::P * padded_channels(s.oc) * padded_channels(s.g.c);
}

// Ut[c][oc] = U[oc][c] for one plane (U: OC x Cp, Ut: Cp x OCp, zero where
// oc >= OC), in 8x8 blocks so both sides are read and written in whole rows.
LS_SIMD_CLONES void transpose_plane(const float* U, int64_t OC, int64_t Cp, int64_t OCp, float* Ut) {
  for (int64_t c0 = 0; c0 < Cp; c0 += 8)
    for (int64_t oc0 = 0; oc0 < OCp; oc0 += 8) {
      f8 r[8];
      for (int k = 0; k < 8; ++k) r[k] = oc0 + k < OC ? load8(U + (oc0 + k) * Cp + c0) : splat8(0.f);
      transpose8x8(r);
      for (int k = 0; k < 8; ++k) store8(Ut + (c0 + k) * OCp + oc0, r[k]);
    }
}

// U[xi][oc][c0..c0+8) = (G g G^T)[xi] for 8 input channels of one output
// channel at a time: their filters (8 runs of R*R taps in w [OC][C][R][R]) are
// transposed into one vector per tap, so the transform is 8-wide and each
// plane's store is one contiguous 8-float write. Zero for padded channels.
template <int R, int Mo>
LS_SIMD_CLONES void transform_filter_rows(const Conv2dShape& s, const float* w, float* U, int64_t o0, int64_t o1) {
  using W = Wino<R, Mo>;
  constexpr int K = R * R;
  const int64_t C = s.g.c, Cp = padded_channels(C), plane = s.oc * Cp;
  for (int64_t oc = o0; oc < o1; ++oc)
    for (int64_t c0 = 0; c0 < Cp; c0 += 8) {
      const int64_t valid = std::min<int64_t>(8, C - c0);
      const float* src = w + (oc * C + c0) * K;
      alignas(32) float taps[K * 8];
      if (valid == 8) {
        interleave_channels(src, K, K, taps);
      } else {
        std::fill_n(taps, K * 8, 0.f);
        for (int64_t j = 0; j < valid; ++j)
          for (int k = 0; k < K; ++k) taps[k * 8 + j] = src[j * K + k];
      }
      f8 g[K], u[W::P];
      for (int k = 0; k < K; ++k) g[k] = load8(taps + k * 8);
      sandwich<W::A, R, W::A, R>(W::M.G, W::M.G, g, u);
      for (int xi = 0; xi < W::P; ++xi) store8(U + xi * plane + oc * Cp + c0, u[xi]);
    }
}

// U[xi][oc][c] = (G g G^T)[xi] for w [OC][C][R][R], zero for padded channels;
// with Ut, also its transpose Ut[xi][c][oc] (zero for padded rows and columns).
template <int R, int Mo>
void transform_filters(const Conv2dShape& s, const float* w, float* U, float* Ut) {
  using W = Wino<R, Mo>;
  const int64_t Cp = padded_channels(s.g.c), OC = s.oc, OCp = padded_channels(OC), plane = OC * Cp;
  parallel_for(OC, kMinFilterRows, [&](int64_t o0, int64_t o1) { transform_filter_rows<R, Mo>(s, w, U, o0, o1); });
  if (Ut)
    parallel_for(W::P, 1, [&](int64_t x0, int64_t x1) {
      for (int64_t xi = x0; xi < x1; ++xi) transpose_plane(U + xi * plane, OC, Cp, OCp, Ut + xi * Cp * OCp);
    });
}

// The forward product M = Vt * U^T runs on Ut (sgemm_small's layout) where
// sgemm_small's kernel takes it or output channels are padded (Ut's zero
// columns keep M's padded lanes zero); otherwise OpenBLAS reads U transposed
// and Ut is never built.
bool forward_uses_ut(const Conv2dShape& s) {
  return s.oc % 8 != 0 || sgemm_small_uses_kernel(Trans::N, 1, padded_channels(s.oc), s.g.c);
}

// dW[oc][c] (+)= (G^T S G) for S [P][OC][Cp], 8 input channels at a time: a
// plane's 8 sums are one contiguous load, and the R*R results for the 8
// channels are transposed back into their filters' runs of taps.
template <int R, int Mo>
LS_SIMD_CLONES void weight_rows_from_s(const Conv2dShape& s, const float* S, float* dw, bool accumulate, int64_t o0,
                                       int64_t o1) {
  using W = Wino<R, Mo>;
  constexpr int K = R * R;
  const int64_t C = s.g.c, Cp = padded_channels(C), plane = s.oc * Cp;
  for (int64_t oc = o0; oc < o1; ++oc)
    for (int64_t c0 = 0; c0 < C; c0 += 8) {
      const int64_t valid = std::min<int64_t>(8, C - c0);
      f8 m[W::P], r[K];
      for (int xi = 0; xi < W::P; ++xi) m[xi] = load8(S + xi * plane + oc * Cp + c0);
      sandwich<R, W::A, R, W::A>(W::M.GT, W::M.GT, m, r);
      alignas(32) float taps[K * 8];
      for (int k = 0; k < K; ++k) store8(taps + k * 8, r[k]);
      float* out = dw + (oc * C + c0) * K;
      if (accumulate) {
        for (int64_t j = 0; j < valid; ++j)
          for (int k = 0; k < K; ++k) out[j * K + k] += taps[k * 8 + j];
      } else if (valid == 8) {
        deinterleave_channels(taps, K, out, K);
      } else {
        for (int64_t j = 0; j < valid; ++j)
          for (int k = 0; k < K; ++k) out[j * K + k] = taps[k * 8 + j];
      }
    }
}

template <int R, int Mo>
void weights_from_s(const Conv2dShape& s, const float* S, float* dw, bool accumulate) {
  parallel_for(s.oc, kMinFilterRows,
               [&](int64_t o0, int64_t o1) { weight_rows_from_s<R, Mo>(s, S, dw, accumulate, o0, o1); });
}

// ---------------------------------------------------------------- NCHW planes <-> channel-interleaved planes

// dst[y * row8 + x * 8 + k] = src[k * plane + y * width + x] for y < rows,
// x < width, k < valid <= 8: `valid` NCHW channel planes into a
// channel-interleaved region (lanes k >= valid untouched).
LS_INLINE void nchw_to_plane8(const float* src, int64_t plane, int64_t rows, int64_t width, int64_t valid, float* dst,
                              int64_t row8) {
  for (int64_t y = 0; y < rows; ++y) {
    float* d = dst + y * row8;
    const float* r = src + y * width;
    if (valid == 8) {
      interleave_channels(r, plane, width, d);
    } else {
      for (int64_t x = 0; x < width; ++x)
        for (int64_t k = 0; k < valid; ++k) d[x * 8 + k] = r[k * plane + x];
    }
  }
}

// The inverse: `valid` NCHW channel planes out of a channel-interleaved region.
LS_INLINE void plane8_to_nchw(const float* src, int64_t row8, int64_t rows, int64_t width, int64_t valid, float* dst,
                              int64_t plane) {
  for (int64_t y = 0; y < rows; ++y) {
    const float* r = src + y * row8;
    float* d = dst + y * width;
    if (valid == 8) {
      deinterleave_channels(r, width, d, plane);
    } else {
      for (int64_t x = 0; x < width; ++x)
        for (int64_t k = 0; k < valid; ++k) d[k * plane + x] = r[x * 8 + k];
    }
  }
}

// Zeroes a region of a channel-interleaved plane (row8 floats per row) outside
// the rows x cols block at (r0, c0) that is about to be written in full: the
// writes would overwrite the rest, so it is left alone.
LS_INLINE void zero_around(float* p8, int64_t row8, int64_t rows_all, int64_t cols_all, int64_t r0, int64_t c0,
                           int64_t rows, int64_t cols) {
  std::fill_n(p8, r0 * row8, 0.f);
  for (int64_t y = r0; y < r0 + rows; ++y) {
    float* r = p8 + y * row8;
    std::fill_n(r, c0 * 8, 0.f);
    std::fill_n(r + (c0 + cols) * 8, (cols_all - c0 - cols) * 8, 0.f);
  }
  std::fill_n(p8 + (r0 + rows) * row8, (rows_all - r0 - rows) * row8, 0.f);
}

// Fills p8 (ph x pw x 8) with channels [c0, c0 + 8) of one image (zeros for
// channels >= C), zero-padded: p8[y + pad][x + pad] = x[y][x]. With 8 channels
// the image overwrites its block, so only the padding around it is zeroed.
LS_SIMD_CLONES void load_plane8(const ConvGeometry& g, const Tiles& tl, const float* ximg, int64_t c0, float* p8) {
  const int64_t valid = std::min<int64_t>(8, g.c - c0), row8 = tl.pw * 8;
  if (valid == 8)
    zero_around(p8, row8, tl.ph, tl.pw, g.pad, g.pad, g.h, g.w);
  else
    std::fill_n(p8, tl.ph * row8, 0.f);  // lanes >= valid stay zero
  const int64_t plane = g.h * g.w;
  nchw_to_plane8(ximg + c0 * plane, plane, g.h, g.w, valid, p8 + (g.pad * tl.pw + g.pad) * 8, row8);
}

// ---------------------------------------------------------------- transforms

// Vt[xi][t][c] = (BT d BT^T)[xi] for images [n0, n0 + nb) of x, 8 channels at a time.
template <int R, int Mo>
LS_SIMD_CLONES void load_inputs(const Conv2dShape& s, const Tiles& tl, const float* x, int64_t n0, int64_t nb,
                                int64_t T, const Scratch& sc) {
  using W = Wino<R, Mo>;
  const ConvGeometry& g = s.g;
  const int64_t Cp = padded_channels(g.c), vp = plane_stride(Cp * T), row8 = tl.pw * 8;
  for (int64_t img = 0; img < nb; ++img)
    for (int64_t c0 = 0; c0 < Cp; c0 += 8) {
      load_plane8(g, tl, x + (n0 + img) * g.c * g.h * g.w, c0, sc.p8);
      for (int64_t ti = 0; ti < tl.th; ++ti)
        for (int64_t tj = 0; tj < tl.tw; ++tj) {
          const float* src = sc.p8 + (W::O * ti) * row8 + (W::O * tj) * 8;
          f8 d[W::P], v[W::P];
          for (int r = 0; r < W::A; ++r)
            for (int q = 0; q < W::A; ++q) d[r * W::A + q] = load8(src + r * row8 + q * 8);
          sandwich<W::A, W::A, W::A, W::A>(W::M.BT, W::M.BT, d, v);
          float* out = sc.V + (img * tl.per_image + ti * tl.tw + tj) * Cp + c0;
          for (int k = 0; k < W::P; ++k) store8(out + k * vp, v[k]);
        }
    }
}

// One image's output channels [oc0, oc0 + 8) from its tiles' products Mi
// ([xi][tile][OCp], plane stride mp): each tile's AT m AT^T plus bias,
// optionally ReLU, goes to a channel-interleaved plane (2 th x 2 tw used),
// whose top-left OH x OW is then transposed back to NCHW.
template <int R, int Mo, bool kRelu>
LS_SIMD_CLONES void store_outputs(const Conv2dShape& s, const Tiles& tl, const float* Mi, int64_t mp, const float* b,
                                  int64_t oc0, float* p8, float* yimg) {
  using W = Wino<R, Mo>;
  const ConvGeometry& g = s.g;
  const int64_t OCp = padded_channels(s.oc), row8 = tl.pw * 8, plane = g.oh * g.ow;
  const int64_t valid = std::min<int64_t>(8, s.oc - oc0);
  f8 bias = splat8(0.f);
  if (b)
    for (int64_t k = 0; k < valid; ++k) bias[k] = b[oc0 + k];
  const f8 zero = splat8(0.f);
  for (int64_t ti = 0; ti < tl.th; ++ti)
    for (int64_t tj = 0; tj < tl.tw; ++tj) {
      const float* m = Mi + (ti * tl.tw + tj) * OCp + oc0;
      f8 mv[W::P], y[W::O * W::O];
      for (int k = 0; k < W::P; ++k) mv[k] = load8(m + k * mp);
      sandwich<W::O, W::A, W::O, W::A>(W::M.AT, W::M.AT, mv, y);
      float* dst = p8 + (W::O * ti) * row8 + (W::O * tj) * 8;
      for (int k = 0; k < W::O * W::O; ++k) {
        f8 v = y[k] + bias;
        if (kRelu) v = v > zero ? v : zero;
        store8(dst + (k / W::O) * row8 + (k % W::O) * 8, v);
      }
    }
  plane8_to_nchw(p8, row8, g.oh, g.ow, valid, yimg + oc0 * plane, plane);
}

// W = AT^T g AT for one image's m x m dy tiles g, output channels [oc0, oc0 + 8),
// into Wi ([xi][tile][OCp], plane stride mp); zero for channels >= OC and for
// tile cells past the output's edge. With db, also adds each channel's sum of
// dy (in element order, from the interleaved copy) to db[oc].
template <int R, int Mo>
LS_SIMD_CLONES void load_grads(const Conv2dShape& s, const Tiles& tl, const float* dyimg, int64_t oc0, float* p8,
                               float* Wi, int64_t mp, float* db) {
  using W = Wino<R, Mo>;
  const ConvGeometry& g = s.g;
  const int64_t OCp = padded_channels(s.oc), row8 = tl.pw * 8, plane = g.oh * g.ow;
  const int64_t valid = std::min<int64_t>(8, s.oc - oc0);
  // The tiles read rows [0, O th) and columns [0, O tw); dy covers the top-left OH x OW of that.
  if (valid == 8)
    zero_around(p8, row8, W::O * tl.th, W::O * tl.tw, 0, 0, g.oh, g.ow);
  else
    std::fill_n(p8, W::O * tl.th * row8, 0.f);
  nchw_to_plane8(dyimg + oc0 * plane, plane, g.oh, g.ow, valid, p8, row8);
  if (db) {
    f8 acc = splat8(0.f);
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox) acc += load8(p8 + oy * row8 + ox * 8);
    for (int64_t k = 0; k < valid; ++k) db[oc0 + k] += acc[k];
  }
  for (int64_t ti = 0; ti < tl.th; ++ti)
    for (int64_t tj = 0; tj < tl.tw; ++tj) {
      const float* cell = p8 + (W::O * ti) * row8 + (W::O * tj) * 8;
      f8 gv[W::O * W::O], o[W::P];
      for (int r = 0; r < W::O; ++r)
        for (int q = 0; q < W::O; ++q) gv[r * W::O + q] = load8(cell + r * row8 + q * 8);
      sandwich<W::A, W::O, W::A, W::O>(W::M.A, W::M.A, gv, o);
      float* w = Wi + (ti * tl.tw + tj) * OCp + oc0;
      for (int k = 0; k < W::P; ++k) store8(w + k * mp, o[k]);
    }
}

// dx for images [n0, n0 + nb) from Zt: each tile's BT^T Z BT (8 channels at a
// time) is added into a padded channel-interleaved plane, whose interior is
// then transposed back to NCHW.
template <int R, int Mo>
LS_SIMD_CLONES void scatter_dx(const Conv2dShape& s, const Tiles& tl, int64_t n0, int64_t nb, int64_t T, float* dx,
                               const Scratch& sc) {
  using W = Wino<R, Mo>;
  const ConvGeometry& g = s.g;
  const int64_t Cp = padded_channels(g.c), vp = plane_stride(Cp * T), row8 = tl.pw * 8, plane = g.h * g.w;
  for (int64_t img = 0; img < nb; ++img)
    for (int64_t c0 = 0; c0 < Cp; c0 += 8) {
      // Tiles in raster order cover the whole ph x pw plane. A tile's cell was
      // written by an earlier tile when it lies in the R - 1 rows shared with
      // the tile row above or the R - 1 columns shared with the tile to the
      // left: there it adds, elsewhere it stores 0 + value (the sum a zeroed
      // plane would give, -0 included), so the plane needs no clearing.
      const f8 zero = splat8(0.f);
      for (int64_t ti = 0; ti < tl.th; ++ti)
        for (int64_t tj = 0; tj < tl.tw; ++tj) {
          const float* z = sc.V + (img * tl.per_image + ti * tl.tw + tj) * Cp + c0;
          f8 zin[W::P], o[W::P];
          for (int k = 0; k < W::P; ++k) zin[k] = load8(z + k * vp);
          sandwich<W::A, W::A, W::A, W::A>(W::M.B, W::M.B, zin, o);
          float* dst = sc.p8 + (W::O * ti) * row8 + (W::O * tj) * 8;
          for (int r = 0; r < W::A; ++r)
            for (int q = 0; q < W::A; ++q) {
              float* p = dst + r * row8 + q * 8;
              const bool seen = (ti > 0 && r < R - 1) || (tj > 0 && q < R - 1);
              store8(p, (seen ? load8(p) : zero) + o[r * W::A + q]);
            }
        }
      // dx[iy][ix] = plane[iy + pad][ix + pad] (the plane covers the image, see tiles_of)
      plane8_to_nchw(sc.p8 + (g.pad * tl.pw + g.pad) * 8, row8, g.h, g.w, std::min<int64_t>(8, g.c - c0),
                     dx + ((n0 + img) * g.c + c0) * plane, plane);
    }
}

// ---------------------------------------------------------------- one chunk of images

template <int R, int Mo>
void forward_chunk(const Conv2dShape& s, const Tiles& tl, int64_t n0, int64_t nb, const float* x, const float* U,
                   const float* Ut, const float* b, float* y, bool relu, const Scratch& sc) {
  using W = Wino<R, Mo>;
  const ConvGeometry& g = s.g;
  const int64_t C = g.c, Cp = padded_channels(C), OCp = padded_channels(s.oc), T = nb * tl.per_image;
  const int64_t vp = plane_stride(Cp * T), mp = plane_stride(OCp * T);
  load_inputs<R, Mo>(s, tl, x, n0, nb, T, sc);
  // M[xi] (T x OCp) = Vt[xi] (T x C) * U[xi]^T (C x OCp); padded channels are zero in Vt, U and Ut.
  for (int xi = 0; xi < W::P; ++xi) {
    if (Ut)
      sgemm_small(Trans::N, T, OCp, C, sc.V + xi * vp, Cp, Ut + xi * Cp * OCp, OCp, sc.M + xi * mp, OCp, false);
    else
      sgemm(Trans::N, Trans::T, T, s.oc, C, 1.f, sc.V + xi * vp, Cp, U + xi * s.oc * Cp, Cp, 0.f, sc.M + xi * mp, OCp);
  }
  for (int64_t img = 0; img < nb; ++img) {
    const float* Mi = sc.M + img * tl.per_image * OCp;
    float* yimg = y + (n0 + img) * s.oc * g.oh * g.ow;
    for (int64_t oc0 = 0; oc0 < s.oc; oc0 += 8) {
      if (relu)
        store_outputs<R, Mo, true>(s, tl, Mi, mp, b, oc0, sc.p8, yimg);
      else
        store_outputs<R, Mo, false>(s, tl, Mi, mp, b, oc0, sc.p8, yimg);
    }
  }
}

// Adds this chunk's weight-gradient sums into sc.S (and db), writes dx.
template <int R, int Mo>
void backward_chunk(const Conv2dShape& s, const Tiles& tl, int64_t n0, int64_t nb, const float* x, const float* U,
                    const float* y, float* dy, float* dx, bool with_db, bool relu, const Scratch& sc) {
  using W = Wino<R, Mo>;
  const ConvGeometry& g = s.g;
  const int64_t Cp = padded_channels(g.c), OC = s.oc, OCp = padded_channels(OC), T = nb * tl.per_image;
  const int64_t P = g.oh * g.ow, vp = plane_stride(Cp * T), mp = plane_stride(OCp * T);
  float* dyn = dy + n0 * OC * P;
  if (relu) relu_backward_serial(nb * OC * P, y + n0 * OC * P, dyn, dyn);
  float* db = with_db ? sc.S + W::P * OC * Cp : nullptr;
  for (int64_t img = 0; img < nb; ++img)
    for (int64_t oc0 = 0; oc0 < OC; oc0 += 8)
      load_grads<R, Mo>(s, tl, dyn + img * OC * P, oc0, sc.p8, sc.M + img * tl.per_image * OCp, mp, db);
  load_inputs<R, Mo>(s, tl, x, n0, nb, T, sc);
  // S[xi] (OC x Cp) += W[xi]^T (OC x T) * Vt[xi] (T x Cp)
  for (int xi = 0; xi < W::P; ++xi)
    sgemm_small(Trans::T, OC, Cp, T, sc.M + xi * mp, OCp, sc.V + xi * vp, Cp, sc.S + xi * OC * Cp, Cp, true);
  if (!dx) return;
  // Zt[xi] (T x Cp) = W[xi] (T x OC) * U[xi] (OC x Cp); Vt is free again.
  for (int xi = 0; xi < W::P; ++xi)
    sgemm_small(Trans::N, T, Cp, OC, sc.M + xi * mp, OCp, U + xi * OC * Cp, Cp, sc.V + xi * vp, Cp, false);
  scatter_dx<R, Mo>(s, tl, n0, nb, T, dx, sc);
}

template <int R, int Mo>
void forward_impl(const Conv2dShape& s, const float* x, const float* w, const float* b, float* y, bool relu,
                  Workspace& ws) {
  using W = Wino<R, Mo>;
  const Tiles tl = tiles_of(s, Mo);
  const int64_t nb = chunk_images(s, tl, W::P);
  const int threads = compute_threads(s.n, 1);
  float* U = ws.shared(filter_floats<R, Mo>(s));
  float* Ut = forward_uses_ut(s) ? U + filter_floats<R, Mo>(s) / 2 : nullptr;
  transform_filters<R, Mo>(s, w, U, Ut);
  ws.reserve(threads, scratch_floats(s, tl, nb, W::P));
  parallel_ranges(threads, s.n, [&](int t, int64_t n0, int64_t n1) {
    const Scratch sc = carve(ws.floats(t), s, tl, nb, W::P);
    for (int64_t n = n0; n < n1; n += nb) forward_chunk<R, Mo>(s, tl, n, std::min(nb, n1 - n), x, U, Ut, b, y, relu, sc);
  });
}

template <int R, int Mo>
void backward_impl(const Conv2dShape& s, const float* x, const float* w, const float* y, float* dy, float* dx,
                   float* dw, float* db, bool accumulate, bool relu, Workspace& ws, bool filters_from_forward) {
  using W = Wino<R, Mo>;
  const Tiles tl = tiles_of(s, Mo);
  const int64_t nb = chunk_images(s, tl, W::P);
  const int threads = compute_threads(s.n, 1);
  const int64_t splane = W::P * s.oc * padded_channels(s.g.c);
  float* U = ws.shared(filter_floats<R, Mo>(s));  // the forward's buffer: the same size, so not reallocated
  if (!filters_from_forward) transform_filters<R, Mo>(s, w, U, nullptr);
  ws.reserve(threads, scratch_floats(s, tl, nb, W::P));
  float* S = carve(ws.floats(0), s, tl, nb, W::P).S;
  if (s.n == 0) std::fill_n(S, splane + s.oc, 0.f);  // the region runs no thread to clear its sums
  parallel_ranges(threads, s.n, [&](int t, int64_t n0, int64_t n1) {
    const Scratch sc = carve(ws.floats(t), s, tl, nb, W::P);
    std::fill_n(sc.S, splane + s.oc, 0.f);
    for (int64_t n = n0; n < n1; n += nb)
      backward_chunk<R, Mo>(s, tl, n, std::min(nb, n1 - n), x, U, y, dy, dx, db != nullptr, relu, sc);
  });
  // Thread partials added in thread order for every element (split over elements: the same sums).
  parallel_for(splane + s.oc, int64_t{1} << 14, [&](int64_t b, int64_t e) {
    for (int t = 1; t < threads; ++t) add_inplace_serial(e - b, carve(ws.floats(t), s, tl, nb, W::P).S + b, S + b);
  });
  weights_from_s<R, Mo>(s, S, dw, accumulate);
  if (db)
    for (int64_t oc = 0; oc < s.oc; ++oc) db[oc] = (accumulate ? db[oc] : 0.f) + S[splane + oc];
}

}  // namespace

bool conv2d_winograd_applies(const Conv2dShape& s) {
  const auto& g = s.g;
  return (g.kh == 3 || g.kh == 5) && g.kw == g.kh && g.stride == 1 && g.pad < g.kh && g.oh > 0 && g.ow > 0;
}

int64_t conv2d_winograd_tiles(const Conv2dShape& s, int m) {
  return tiles_of(s, m).per_image;
}

int conv2d_winograd_output_tile(const Conv2dShape& s) {
  if (s.g.kh != 3) return 2;
  // F(4x4, 3x3) needs 36 products per 16 outputs against F(2x2, 3x3)'s 16 per
  // 4, but rounds the output up to multiples of 4, and its filter transforms
  // (once per step) are 36 planes against 16. Take it where its products for
  // the whole (rounded-up) output are strictly fewer and the batch holds at
  // least 256 of its tiles: measured (2 threads) faster at resnet20's 8x8
  // outputs with batch 64 (256 tiles; 7.1 -> 6.2 ms per block), slower at
  // resnet50's 8x8 with batch 32 (128 tiles; +11% forward) and 4x4 (32 tiles; +65%).
  const int64_t t2 = conv2d_winograd_tiles(s, 2), t4 = conv2d_winograd_tiles(s, 4);
  return t4 * 36 < t2 * 16 && s.n * t4 >= 256 ? 4 : 2;
}

void conv2d_winograd_forward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* b, float* y,
                                 bool relu, Workspace& ws) {
  if (s.g.kh == 5)
    forward_impl<5, 2>(s, x, w, b, y, relu, ws);
  else if (conv2d_winograd_output_tile(s) == 4)
    forward_impl<3, 4>(s, x, w, b, y, relu, ws);
  else
    forward_impl<3, 2>(s, x, w, b, y, relu, ws);
}

void conv2d_winograd_backward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* y, float* dy,
                                  float* dx, float* dw, float* db, bool accumulate, bool relu, Workspace& ws,
                                  bool filters_from_forward) {
  if (s.g.kh == 5)
    backward_impl<5, 2>(s, x, w, y, dy, dx, dw, db, accumulate, relu, ws, filters_from_forward);
  else if (conv2d_winograd_output_tile(s) == 4)
    backward_impl<3, 4>(s, x, w, y, dy, dx, dw, db, accumulate, relu, ws, filters_from_forward);
  else
    backward_impl<3, 2>(s, x, w, y, dy, dx, dw, db, accumulate, relu, ws, filters_from_forward);
}

}  // namespace lockstep::ops
