// Winograd F(2x2, r x r) convolution for 3x3 and 5x5 stride-1 layers (CPU).
//
// An (r+1)x(r+1) input tile d gives a 2x2 output tile (matrices in
// winograd_matrices.h, alpha = r + 1, P = alpha^2 "planes"):
//   Y = AT [ (G g G^T) .* (BT d BT^T) ] AT^T
// Summing over channels turns the P elementwise products into P GEMMs:
//   forward  M[xi] (OC x T) = U[xi] (OC x C) * V[xi] (C x T)     U = G g G^T,  V = BT d BT^T
//   dgrad    Z[xi] (C x T)  = U[xi]^T * W[xi] (OC x T)           W = AT^T dy AT, dx tile = BT^T Z BT
//   wgrad    S[xi] (OC x C) = sum over tiles of W[xi] * V[xi]^T  dW = G^T S G
// (dgrad and wgrad are derivatives of the same trilinear form, so they share
// its transforms.) Multiplies per output: 3x3: 16/4 vs 9 (2.25x fewer);
// 5x5: 36/4 vs 25 (2.8x fewer).
//
// Tiles start at (2 ti - pad, 2 tj - pad); reads outside the image are zero and
// writes outside it are dropped. Chunk tiles are numbered t = img * T + ti * tw + tj.
// Layouts, chosen so every transform is 8-wide vector code:
//   input side (V, Z): [xi][t][c] — 8 channels at a time through a zero-padded,
//     channel-interleaved copy of the image (NCHW rows transposed 8x8), so a
//     tile's P values for 8 channels are P contiguous 8-float loads. Channels
//     are padded to a multiple of 8 with zeros (U is zero there).
//   output side (M, W): [xi][oc][t] — transforms run along tiles.
#include <algorithm>
#include <cstring>

#include "ops/conv2d.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/simd.h"
#include "ops/winograd_matrices.h"

namespace lockstep::ops {
namespace {

constexpr int64_t kSlack = 16;  // floats past the end of row buffers that 8-wide loads may touch

template <int R>
struct Wino {
  static constexpr int A = R + 1;  // tile size
  static constexpr int P = A * A;  // transform planes
  static constexpr winograd::Matrices<R> M = winograd::make_matrices<R>();
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

Tiles tiles_of(const Conv2dShape& s) {
  Tiles t;
  t.th = (s.g.oh + 1) / 2;
  t.tw = (s.g.ow + 1) / 2;
  t.per_image = t.th * t.tw;
  t.pw = 2 * t.tw + s.g.kw - 1;  // >= OW + k - 1 = W + 2 pad: the plane holds the whole image
  t.ph = 2 * t.th + s.g.kh - 1;
  return t;
}

int64_t padded_channels(int64_t c) { return (c + 7) / 8 * 8; }

// Distance between the planes of a transform buffer holding n floats each.
// Padded past a multiple of 4 KiB: planes 4 KiB apart would all map to the
// same L1 sets and evict each other on every access.
int64_t plane_stride(int64_t n) { return (n + 15) / 16 * 16 + 16; }

// Images per chunk: about 512 tiles so the small-K GEMMs run efficiently, with
// buffers up to 4 MB (measured best for lenet and keras-cnn on a 512 KB-L2 Zen 3).
int64_t chunk_images(const Conv2dShape& s, const Tiles& t, int planes) {
  const int64_t per_image_floats = planes * (padded_channels(s.g.c) + s.oc) * t.per_image;
  const int64_t by_cache = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(per_image_floats, 1));
  const int64_t by_width = std::max<int64_t>(1, (512 + t.per_image - 1) / t.per_image);
  return std::clamp<int64_t>(std::min(by_cache, by_width), 1, std::max<int64_t>(s.n, 1));
}

struct Scratch {
  float* V;      // P planes of [T][Cp] (stride plane_stride(Cp*T)): input transforms, later Z
  float* M;      // P planes of [OC][T]: forward products / dy transforms
  float* q[4];   // [T] tile-major 2x2 output or dy values
  float* row;    // a padded dy row (2 tw + kSlack)
  float* p8;     // padded, channel-interleaved plane: ph x pw x 8
  float* zeros;  // a zero dy row (2 tw + kSlack)
  float* S;      // P planes of [OC][Cp] + [OC]: this thread's weight-gradient sums and db
};

int64_t scratch_floats(const Conv2dShape& s, const Tiles& tl, int64_t nb, int planes) {
  const int64_t T = nb * tl.per_image, Cp = padded_channels(s.g.c);
  return planes * (plane_stride(Cp * T) + plane_stride(s.oc * T)) + 4 * plane_stride(T) + 2 * (2 * tl.tw + kSlack) +
         tl.ph * tl.pw * 8 + planes * s.oc * Cp + s.oc;
}

Scratch carve(float* p, const Conv2dShape& s, const Tiles& tl, int64_t nb, int planes) {
  const int64_t T = nb * tl.per_image, Cp = padded_channels(s.g.c);
  Scratch sc;
  sc.V = p;
  p += planes * plane_stride(Cp * T);
  sc.M = p;
  p += planes * plane_stride(s.oc * T);
  for (auto& q : sc.q) {
    q = p;
    p += plane_stride(T);
  }
  sc.row = p;
  p += 2 * tl.tw + kSlack;
  sc.zeros = p;
  p += 2 * tl.tw + kSlack;
  sc.p8 = p;
  p += tl.ph * tl.pw * 8;
  sc.S = p;
  return sc;
}

// Output channels per thread in the filter transforms below (each (oc, c) pair
// is independent, so the split changes no result).
constexpr int64_t kMinFilterRows = 8;

// U[xi][oc][c] = (G g G^T)[xi] for w [OC][C][R][R]; zero for padded channels.
template <int R>
void transform_filters(const Conv2dShape& s, const float* w, float* U) {
  using W = Wino<R>;
  const int64_t C = s.g.c, Cp = padded_channels(C), OC = s.oc, plane = OC * Cp;
  parallel_for(OC, kMinFilterRows, [&](int64_t o0, int64_t o1) {
    for (int64_t oc = o0; oc < o1; ++oc) {
      for (int xi = 0; xi < W::P; ++xi) std::fill(U + xi * plane + oc * Cp + C, U + xi * plane + (oc + 1) * Cp, 0.f);
      for (int64_t c = 0; c < C; ++c) {
        float u[W::P];
        sandwich<W::A, R, W::A, R>(W::M.G, W::M.G, w + (oc * C + c) * R * R, u);
        for (int xi = 0; xi < W::P; ++xi) U[xi * plane + oc * Cp + c] = u[xi];
      }
    }
  });
}

// dW[oc][c] (+)= (G^T S G) for S [P][OC][Cp].
template <int R>
void weights_from_s(const Conv2dShape& s, const float* S, float* dw, bool accumulate) {
  using W = Wino<R>;
  const int64_t C = s.g.c, Cp = padded_channels(C), OC = s.oc, plane = OC * Cp;
  parallel_for(OC, kMinFilterRows, [&](int64_t o0, int64_t o1) {
    for (int64_t oc = o0; oc < o1; ++oc)
      for (int64_t c = 0; c < C; ++c) {
        float m[W::P], r[R * R];
        for (int xi = 0; xi < W::P; ++xi) m[xi] = S[xi * plane + oc * Cp + c];
        sandwich<R, W::A, R, W::A>(W::M.GT, W::M.GT, m, r);
        float* out = dw + (oc * C + c) * R * R;
        for (int k = 0; k < R * R; ++k) out[k] = accumulate ? out[k] + r[k] : r[k];
      }
  });
}

// ---------------------------------------------------------------- NCHW rows <-> tile-major arrays

// out_k[tj] = row[2 tj + k] for k = 0, 1 (a dy row; readable to 2 tw + kSlack).
LS_SIMD_CLONES void split2(const float* row, int64_t tw, float* o0, float* o1) {
  int64_t j = 0;
  for (; j + 8 <= tw; j += 8) {
    f8 e, o;
    deinterleave8(row + 2 * j, e, o);
    store8(o0 + j, e);
    store8(o1 + j, o);
  }
  for (; j < tw; ++j) {
    o0[j] = row[2 * j];
    o1[j] = row[2 * j + 1];
  }
}

// row[2 tj] = e[tj], row[2 tj + 1] = o[tj] for 2 tj + 1 < width; row[2 tj] only at an odd end.
LS_SIMD_CLONES void merge2(float* row, int64_t width, const float* e, const float* o) {
  const int64_t full = width / 2;
  int64_t j = 0;
  for (; j + 8 <= full; j += 8) interleave8(row + 2 * j, load8(e + j), load8(o + j));
  for (; j < full; ++j) {
    row[2 * j] = e[j];
    row[2 * j + 1] = o[j];
  }
  if (width % 2) row[2 * full] = e[full];
}

// Fills p8 (ph x pw x 8) with channels [c0, c0 + 8) of one image (zeros for
// channels >= C), zero-padded: p8[y + pad][x + pad] = x[y][x].
LS_SIMD_CLONES void load_plane8(const ConvGeometry& g, const Tiles& tl, const float* ximg, int64_t c0, float* p8) {
  std::fill_n(p8, tl.ph * tl.pw * 8, 0.f);
  const int64_t valid = std::min<int64_t>(8, g.c - c0), plane = g.h * g.w;
  for (int64_t iy = 0; iy < g.h; ++iy) {
    float* dst = p8 + ((iy + g.pad) * tl.pw + g.pad) * 8;
    const float* src = ximg + c0 * plane + iy * g.w;
    if (valid == 8) {
      interleave_channels(src, plane, g.w, dst);
    } else {
      for (int64_t ix = 0; ix < g.w; ++ix)
        for (int64_t k = 0; k < valid; ++k) dst[ix * 8 + k] = src[k * plane + ix];
    }
  }
}

// ---------------------------------------------------------------- transforms

// Vt[xi][t][c] = (BT d BT^T)[xi] for images [n0, n0 + nb) of x, 8 channels at a time.
template <int R>
LS_SIMD_CLONES void load_inputs(const Conv2dShape& s, const Tiles& tl, const float* x, int64_t n0, int64_t nb,
                                int64_t T, const Scratch& sc) {
  using W = Wino<R>;
  const ConvGeometry& g = s.g;
  const int64_t Cp = padded_channels(g.c), vp = plane_stride(Cp * T), row8 = tl.pw * 8;
  for (int64_t img = 0; img < nb; ++img)
    for (int64_t c0 = 0; c0 < Cp; c0 += 8) {
      load_plane8(g, tl, x + (n0 + img) * g.c * g.h * g.w, c0, sc.p8);
      for (int64_t ti = 0; ti < tl.th; ++ti)
        for (int64_t tj = 0; tj < tl.tw; ++tj) {
          const float* src = sc.p8 + (2 * ti) * row8 + (2 * tj) * 8;
          f8 d[W::P], v[W::P];
          for (int r = 0; r < W::A; ++r)
            for (int q = 0; q < W::A; ++q) d[r * W::A + q] = load8(src + r * row8 + q * 8);
          sandwich<W::A, W::A, W::A, W::A>(W::M.BT, W::M.BT, d, v);
          float* out = sc.V + (img * tl.per_image + ti * tl.tw + tj) * Cp + c0;
          for (int k = 0; k < W::P; ++k) store8(out + k * vp, v[k]);
        }
    }
}

// The four outputs of each tile, AT m AT^T, plus bias, optionally ReLU.
template <int R, bool kRelu>
LS_SIMD_CLONES void output_transform(const float* m, int64_t plane, int64_t n, float bias, float* y00, float* y01,
                                     float* y10, float* y11) {
  using W = Wino<R>;
  float* out[4] = {y00, y01, y10, y11};
  int64_t i = 0;
  const f8 vb = splat8(bias), zero = splat8(0.f);
  for (; i + 8 <= n; i += 8) {
    f8 mv[W::P], y[4];
    for (int k = 0; k < W::P; ++k) mv[k] = load8(m + k * plane + i);
    sandwich<2, W::A, 2, W::A>(W::M.AT, W::M.AT, mv, y);
    for (int k = 0; k < 4; ++k) {
      f8 v = y[k] + vb;
      if (kRelu) v = v > zero ? v : zero;
      store8(out[k] + i, v);
    }
  }
  for (; i < n; ++i) {
    float mv[W::P], y[4];
    for (int k = 0; k < W::P; ++k) mv[k] = m[k * plane + i];
    sandwich<2, W::A, 2, W::A>(W::M.AT, W::M.AT, mv, y);
    for (int k = 0; k < 4; ++k) {
      const float v = y[k] + bias;
      out[k][i] = kRelu && v < 0.f ? 0.f : v;
    }
  }
}

// W = AT^T g AT for the 2x2 dy tiles g (four tile-major arrays) into P planes.
template <int R>
LS_SIMD_CLONES void grad_transform(const float* g00, const float* g01, const float* g10, const float* g11, int64_t n,
                                   float* w, int64_t plane) {
  using W = Wino<R>;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const f8 g[4] = {load8(g00 + i), load8(g01 + i), load8(g10 + i), load8(g11 + i)};
    f8 o[W::P];
    sandwich<W::A, 2, W::A, 2>(W::M.A, W::M.A, g, o);
    for (int k = 0; k < W::P; ++k) store8(w + k * plane + i, o[k]);
  }
  for (; i < n; ++i) {
    const float g[4] = {g00[i], g01[i], g10[i], g11[i]};
    float o[W::P];
    sandwich<W::A, 2, W::A, 2>(W::M.A, W::M.A, g, o);
    for (int k = 0; k < W::P; ++k) w[k * plane + i] = o[k];
  }
}

// dx for images [n0, n0 + nb) from Zt: each tile's BT^T Z BT (8 channels at a
// time) is added into a padded channel-interleaved plane, whose interior is
// then transposed back to NCHW.
template <int R>
LS_SIMD_CLONES void scatter_dx(const Conv2dShape& s, const Tiles& tl, int64_t n0, int64_t nb, int64_t T, float* dx,
                               const Scratch& sc) {
  using W = Wino<R>;
  const ConvGeometry& g = s.g;
  const int64_t Cp = padded_channels(g.c), vp = plane_stride(Cp * T), row8 = tl.pw * 8, plane = g.h * g.w;
  for (int64_t img = 0; img < nb; ++img)
    for (int64_t c0 = 0; c0 < Cp; c0 += 8) {
      std::fill_n(sc.p8, tl.ph * row8, 0.f);
      for (int64_t ti = 0; ti < tl.th; ++ti)
        for (int64_t tj = 0; tj < tl.tw; ++tj) {
          const float* z = sc.V + (img * tl.per_image + ti * tl.tw + tj) * Cp + c0;
          f8 zin[W::P], o[W::P];
          for (int k = 0; k < W::P; ++k) zin[k] = load8(z + k * vp);
          sandwich<W::A, W::A, W::A, W::A>(W::M.B, W::M.B, zin, o);
          float* dst = sc.p8 + (2 * ti) * row8 + (2 * tj) * 8;
          for (int r = 0; r < W::A; ++r)
            for (int q = 0; q < W::A; ++q) {
              float* p = dst + r * row8 + q * 8;
              store8(p, load8(p) + o[r * W::A + q]);
            }
        }
      // dx[iy][ix] = plane[iy + pad][ix + pad] (the plane covers the image, see tiles_of)
      const int64_t valid = std::min<int64_t>(8, g.c - c0);
      float* out = dx + ((n0 + img) * g.c + c0) * plane;
      for (int64_t iy = 0; iy < g.h; ++iy) {
        const float* src = sc.p8 + ((iy + g.pad) * tl.pw + g.pad) * 8;
        if (valid == 8) {
          deinterleave_channels(src, g.w, out + iy * g.w, plane);
        } else {
          for (int64_t ix = 0; ix < g.w; ++ix)
            for (int64_t k = 0; k < valid; ++k) out[k * plane + iy * g.w + ix] = src[ix * 8 + k];
        }
      }
    }
}

// ---------------------------------------------------------------- one chunk of images

template <int R>
void forward_chunk(const Conv2dShape& s, const Tiles& tl, int64_t n0, int64_t nb, const float* x, const float* U,
                   const float* b, float* y, bool relu, const Scratch& sc) {
  using W = Wino<R>;
  const ConvGeometry& g = s.g;
  const int64_t Cp = padded_channels(g.c), OC = s.oc, T = nb * tl.per_image;
  const int64_t vp = plane_stride(Cp * T), mp = plane_stride(OC * T);
  load_inputs<R>(s, tl, x, n0, nb, T, sc);
  // M[xi] (OC x T) = U[xi] (OC x Cp) * Vt[xi]^T
  for (int xi = 0; xi < W::P; ++xi)
    sgemm(Trans::N, Trans::T, OC, T, Cp, 1.f, U + xi * OC * Cp, Cp, sc.V + xi * vp, Cp, 0.f, sc.M + xi * mp, T);
  for (int64_t oc = 0; oc < OC; ++oc) {
    const float bias = b ? b[oc] : 0.f;
    if (relu)
      output_transform<R, true>(sc.M + oc * T, mp, T, bias, sc.q[0], sc.q[1], sc.q[2], sc.q[3]);
    else
      output_transform<R, false>(sc.M + oc * T, mp, T, bias, sc.q[0], sc.q[1], sc.q[2], sc.q[3]);
    for (int64_t img = 0; img < nb; ++img) {
      float* yc = y + ((n0 + img) * OC + oc) * g.oh * g.ow;
      for (int64_t ti = 0; ti < tl.th; ++ti) {
        const int64_t t0 = img * tl.per_image + ti * tl.tw;
        merge2(yc + 2 * ti * g.ow, g.ow, sc.q[0] + t0, sc.q[1] + t0);
        if (2 * ti + 1 < g.oh) merge2(yc + (2 * ti + 1) * g.ow, g.ow, sc.q[2] + t0, sc.q[3] + t0);
      }
    }
  }
}

// Adds this chunk's weight-gradient sums into sc.S (and db), writes dx.
template <int R>
void backward_chunk(const Conv2dShape& s, const Tiles& tl, int64_t n0, int64_t nb, const float* x, const float* U,
                    const float* y, float* dy, float* dx, bool with_db, bool relu, const Scratch& sc) {
  using W = Wino<R>;
  const ConvGeometry& g = s.g;
  const int64_t Cp = padded_channels(g.c), OC = s.oc, T = nb * tl.per_image, P = g.oh * g.ow;
  const int64_t vp = plane_stride(Cp * T), mp = plane_stride(OC * T);
  float* dyn = dy + n0 * OC * P;
  if (relu) relu_backward_serial(nb * OC * P, y + n0 * OC * P, dyn, dyn);
  float* db = sc.S + W::P * OC * Cp;
  for (int64_t oc = 0; oc < OC; ++oc) {
    for (int64_t img = 0; img < nb; ++img) {
      const float* dc = dyn + (img * OC + oc) * P;
      if (with_db) {
        float acc = 0.f;
        for (int64_t i = 0; i < P; ++i) acc += dc[i];
        db[oc] += acc;
      }
      for (int64_t ti = 0; ti < tl.th; ++ti) {
        const int64_t t0 = img * tl.per_image + ti * tl.tw;
        for (int r = 0; r < 2; ++r) {
          const int64_t oy = 2 * ti + r;
          const float* src = oy < g.oh ? dc + oy * g.ow : sc.zeros;
          std::copy_n(src, g.ow, sc.row);  // zero-padded to 2 tw + kSlack below
          split2(sc.row, tl.tw, sc.q[2 * r] + t0, sc.q[2 * r + 1] + t0);
        }
      }
    }
    grad_transform<R>(sc.q[0], sc.q[1], sc.q[2], sc.q[3], T, sc.M + oc * T, mp);
  }
  load_inputs<R>(s, tl, x, n0, nb, T, sc);
  // S[xi] (OC x Cp) += W[xi] (OC x T) * Vt[xi] (T x Cp)
  for (int xi = 0; xi < W::P; ++xi)
    sgemm(Trans::N, Trans::N, OC, Cp, T, 1.f, sc.M + xi * mp, T, sc.V + xi * vp, Cp, 1.f, sc.S + xi * OC * Cp, Cp);
  if (!dx) return;
  // Zt[xi] (T x Cp) = W[xi]^T (T x OC) * U[xi] (OC x Cp); Vt is free again.
  for (int xi = 0; xi < W::P; ++xi)
    sgemm(Trans::T, Trans::N, T, Cp, OC, 1.f, sc.M + xi * mp, T, U + xi * OC * Cp, Cp, 0.f, sc.V + xi * vp, Cp);
  scatter_dx<R>(s, tl, n0, nb, T, dx, sc);
}

template <int R>
void forward_impl(const Conv2dShape& s, const float* x, const float* w, const float* b, float* y, bool relu,
                  Workspace& ws) {
  using W = Wino<R>;
  const Tiles tl = tiles_of(s);
  const int64_t nb = chunk_images(s, tl, W::P);
  const int threads = compute_threads(s.n, 1);
  float* U = ws.shared(W::P * s.oc * padded_channels(s.g.c));
  transform_filters<R>(s, w, U);
  ws.reserve(threads, scratch_floats(s, tl, nb, W::P));
  parallel_ranges(threads, s.n, [&](int t, int64_t n0, int64_t n1) {
    const Scratch sc = carve(ws.floats(t), s, tl, nb, W::P);
    for (int64_t n = n0; n < n1; n += nb) forward_chunk<R>(s, tl, n, std::min(nb, n1 - n), x, U, b, y, relu, sc);
  });
}

template <int R>
void backward_impl(const Conv2dShape& s, const float* x, const float* w, const float* y, float* dy, float* dx,
                   float* dw, float* db, bool accumulate, bool relu, Workspace& ws, bool filters_from_forward) {
  using W = Wino<R>;
  const Tiles tl = tiles_of(s);
  const int64_t nb = chunk_images(s, tl, W::P);
  const int threads = compute_threads(s.n, 1);
  const int64_t splane = W::P * s.oc * padded_channels(s.g.c);
  float* U = ws.shared(splane);  // the forward's buffer: the same size, so not reallocated
  if (!filters_from_forward) transform_filters<R>(s, w, U);
  ws.reserve(threads, scratch_floats(s, tl, nb, W::P));
  parallel_ranges(threads, s.n, [&](int t, int64_t n0, int64_t n1) {
    const Scratch sc = carve(ws.floats(t), s, tl, nb, W::P);
    std::fill_n(sc.S, splane + s.oc, 0.f);
    std::fill_n(sc.row, 2 * (2 * tl.tw + kSlack), 0.f);  // row and zeros
    for (int64_t n = n0; n < n1; n += nb)
      backward_chunk<R>(s, tl, n, std::min(nb, n1 - n), x, U, y, dy, dx, db != nullptr, relu, sc);
  });
  // Thread partials added in thread order for every element (split over elements: the same sums).
  float* S = carve(ws.floats(0), s, tl, nb, W::P).S;
  parallel_for(splane + s.oc, int64_t{1} << 14, [&](int64_t b, int64_t e) {
    for (int t = 1; t < threads; ++t) add_inplace_serial(e - b, carve(ws.floats(t), s, tl, nb, W::P).S + b, S + b);
  });
  weights_from_s<R>(s, S, dw, accumulate);
  if (db)
    for (int64_t oc = 0; oc < s.oc; ++oc) db[oc] = (accumulate ? db[oc] : 0.f) + S[splane + oc];
}

}  // namespace

bool conv2d_winograd_applies(const Conv2dShape& s) {
  const auto& g = s.g;
  return (g.kh == 3 || g.kh == 5) && g.kw == g.kh && g.stride == 1 && g.pad < g.kh && g.oh > 0 && g.ow > 0;
}

void conv2d_winograd_forward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* b, float* y,
                                 bool relu, Workspace& ws) {
  if (s.g.kh == 3)
    forward_impl<3>(s, x, w, b, y, relu, ws);
  else
    forward_impl<5>(s, x, w, b, y, relu, ws);
}

void conv2d_winograd_backward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* y, float* dy,
                                  float* dx, float* dw, float* db, bool accumulate, bool relu, Workspace& ws,
                                  bool filters_from_forward) {
  if (s.g.kh == 3)
    backward_impl<3>(s, x, w, y, dy, dx, dw, db, accumulate, relu, ws, filters_from_forward);
  else
    backward_impl<5>(s, x, w, y, dy, dx, dw, db, accumulate, relu, ws, filters_from_forward);
}

}  // namespace lockstep::ops
