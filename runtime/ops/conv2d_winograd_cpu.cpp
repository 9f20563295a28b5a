// Winograd F(2x2, 3x3) convolution for 3x3 stride-1 layers (CPU).
//
// A 4x4 input tile d gives a 2x2 output tile:  Y = A^T [ (G g G^T) .* (B^T d B) ] A
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1]
//   A^T = [1 1 1 0; 0 1 -1 -1]
// Summing over channels turns the 16 elementwise products into 16 GEMMs:
//   forward  M[xi] (OC x T) = U[xi] (OC x C) * V[xi] (C x T)     U = G g G^T,  V = B^T d B
//   dgrad    Z[xi] (C x T)  = U[xi]^T * W[xi] (OC x T)           W = A dy A^T, dx tile = B Z B^T
//   wgrad    S[xi] (OC x C) = sum over tiles of W[xi] * V[xi]^T  dW = G^T S G
// (dgrad and wgrad are derivatives of the same trilinear form, so they share
// the transforms.) That is 2.25x fewer multiplies than im2col + GEMM.
//
// Tiles start at (2 ti - pad, 2 tj - pad); reads outside the image are zero and
// writes outside it are dropped. Chunk tiles are numbered t = img * T + ti * tw + tj.
// Layouts, chosen so every transform is 8-wide vector code:
//   input side (V, Z): [xi][t][c] — 8 channels at a time through a zero-padded,
//     channel-interleaved copy of the image (NCHW rows transposed 8x8), so a
//     tile's 16 values for 8 channels are 16 contiguous 8-float loads;
//   output side (M, W): [xi][oc][t] — transforms run along tiles.
// Hence Winograd needs C % 8 == 0 (conv2d_choose checks).
#include <algorithm>
#include <cstring>

#include "ops/conv2d.h"
#include "ops/gemm.h"
#include "ops/simd.h"

namespace lockstep::ops {
namespace {

constexpr int64_t kSlack = 16;  // floats past the end of row buffers that 8-wide loads may touch

struct Tiles {
  int64_t th, tw, per_image;  // tile rows, tile columns, tiles per image
  int64_t pw;                 // padded input row: tile tj reads [2 tj, 2 tj + 4)
  int64_t ph;                 // padded input rows covered by tiles
};

Tiles tiles_of(const Conv2dShape& s) {
  Tiles t;
  t.th = (s.g.oh + 1) / 2;
  t.tw = (s.g.ow + 1) / 2;
  t.per_image = t.th * t.tw;
  t.pw = 2 * t.tw + 2;
  t.ph = 2 * t.th + 2;
  return t;
}

// Images per chunk: enough tiles for efficient GEMMs, buffers within about L2.
int64_t chunk_images(const Conv2dShape& s, const Tiles& t) {
  const int64_t per_image_floats = 16 * (s.g.c + s.oc) * t.per_image;
  const int64_t by_cache = std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(per_image_floats, 1));
  const int64_t by_width = std::max<int64_t>(1, (64 + t.per_image - 1) / t.per_image);
  return std::clamp<int64_t>(std::min(by_cache, by_width), 1, std::max<int64_t>(s.n, 1));
}

// Distance between the 16 planes of a transform buffer holding n floats each.
// Padded past a multiple of 4 KiB: 16 streams 4 KiB apart would all map to the
// same L1 sets and evict each other on every access.
int64_t plane_stride(int64_t n) { return (n + 15) / 16 * 16 + 16; }

struct Scratch {
  float* V;     // 16 planes of [C][T] (stride plane_stride(C*T)): input transforms, later Z
  float* M;     // 16 planes of [OC][T]: forward products / dy transforms
  float* q[4];  // [Tmax] tile-major 2x2 output or dy values
  float* rows;  // a padded dy row (2 tw + kSlack)
  float* p8;    // padded, channel-interleaved plane: ph x pw x 8
  float* zeros; // a zero dy row (2 tw + kSlack)
  float* S;     // [16][OC][C] + [OC]: this thread's weight-gradient sums and db
};

int64_t scratch_floats(const Conv2dShape& s, const Tiles& tl, int64_t nb) {
  const int64_t T = nb * tl.per_image, rw = tl.pw + kSlack;
  return 16 * (plane_stride(s.g.c * T) + plane_stride(s.oc * T)) + 4 * plane_stride(T) + rw + tl.ph * tl.pw * 8 +
         2 * tl.tw + kSlack + 16 * s.oc * s.g.c + s.oc;
}

Scratch carve(float* p, const Conv2dShape& s, const Tiles& tl, int64_t nb) {
  const int64_t T = nb * tl.per_image, rw = tl.pw + kSlack;
  Scratch sc;
  sc.V = p;
  p += 16 * plane_stride(s.g.c * T);
  sc.M = p;
  p += 16 * plane_stride(s.oc * T);
  for (auto& q : sc.q) {
    q = p;
    p += plane_stride(T);
  }
  sc.rows = p;
  p += rw;
  sc.p8 = p;
  p += tl.ph * tl.pw * 8;
  sc.zeros = p;
  p += 2 * tl.tw + kSlack;
  sc.S = p;
  return sc;
}

// U[xi][oc][c] = (G g G^T)[xi] for w [OC][C][3][3].
void transform_filters(const Conv2dShape& s, const float* w, float* U) {
  const int64_t C = s.g.c, OC = s.oc, plane = OC * C;
  for (int64_t oc = 0; oc < OC; ++oc)
    for (int64_t c = 0; c < C; ++c) {
      const float* g = w + (oc * C + c) * 9;
      float t[4][3];  // G g
      for (int j = 0; j < 3; ++j) {
        t[0][j] = g[j];
        t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
        t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
        t[3][j] = g[6 + j];
      }
      for (int a = 0; a < 4; ++a) {
        const float u[4] = {t[a][0], 0.5f * (t[a][0] + t[a][1] + t[a][2]), 0.5f * (t[a][0] - t[a][1] + t[a][2]),
                            t[a][2]};
        for (int b = 0; b < 4; ++b) U[(a * 4 + b) * plane + oc * C + c] = u[b];
      }
    }
}

// ---------------------------------------------------------------- gathers and scatters (short rows)

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

// ---------------------------------------------------------------- transforms (long loops over tiles)

// The transforms below run over tiles i in [0, n) of 16 planes `plane` floats
// apart, 8 tiles at a time as explicit vectors (the compiler cannot prove the
// planes do not overlap), then a scalar tail. Vector and scalar paths share
// one body written for a generic element type V.

// B^T d B, in place: d[r*4+q] (patch values) -> v[a*4+b].
template <typename V>
LS_INLINE void input_tile(V* d) {
  V t[16];
  for (int q = 0; q < 4; ++q) {
    t[0 * 4 + q] = d[0 * 4 + q] - d[2 * 4 + q];
    t[1 * 4 + q] = d[1 * 4 + q] + d[2 * 4 + q];
    t[2 * 4 + q] = d[2 * 4 + q] - d[1 * 4 + q];
    t[3 * 4 + q] = d[1 * 4 + q] - d[3 * 4 + q];
  }
  for (int a = 0; a < 4; ++a) {
    d[a * 4 + 0] = t[a * 4 + 0] - t[a * 4 + 2];
    d[a * 4 + 1] = t[a * 4 + 1] + t[a * 4 + 2];
    d[a * 4 + 2] = t[a * 4 + 2] - t[a * 4 + 1];
    d[a * 4 + 3] = t[a * 4 + 1] - t[a * 4 + 3];
  }
}

// B Z B^T, in place: z[a*4+b] -> o[r*4+q].
template <typename V>
LS_INLINE void dx_tile(V* z) {
  V q[16];
  for (int a = 0; a < 4; ++a) {
    q[a * 4 + 0] = z[a * 4 + 0];
    q[a * 4 + 1] = z[a * 4 + 1] - z[a * 4 + 2] + z[a * 4 + 3];
    q[a * 4 + 2] = z[a * 4 + 1] + z[a * 4 + 2] - z[a * 4 + 0];
    q[a * 4 + 3] = -z[a * 4 + 3];
  }
  for (int b = 0; b < 4; ++b) {
    z[0 * 4 + b] = q[0 * 4 + b];
    z[1 * 4 + b] = q[1 * 4 + b] - q[2 * 4 + b] + q[3 * 4 + b];
    z[2 * 4 + b] = q[1 * 4 + b] + q[2 * 4 + b] - q[0 * 4 + b];
    z[3 * 4 + b] = -q[3 * 4 + b];
  }
}

// A g A^T: the 2x2 dy tile (g00, g01, g10, g11) -> w[a*4+k].
template <typename V>
LS_INLINE void grad_tile(V a0, V a1, V b0, V b1, V* w) {
  const V c0[4] = {a0, a0 + a1, a0 - a1, -a1};
  const V c1[4] = {b0, b0 + b1, b0 - b1, -b1};
  for (int k = 0; k < 4; ++k) {
    w[0 * 4 + k] = c0[k];
    w[1 * 4 + k] = c0[k] + c1[k];
    w[2 * 4 + k] = c0[k] - c1[k];
    w[3 * 4 + k] = -c1[k];
  }
}

// A^T m A: 16 products -> the 2x2 outputs y[0..3] = (0,0), (0,1), (1,0), (1,1).
template <typename V>
LS_INLINE void output_tile(const V* m, V* y) {
  V p0[4], p1[4];
  for (int a = 0; a < 4; ++a) {
    p0[a] = m[a * 4 + 0] + m[a * 4 + 1] + m[a * 4 + 2];
    p1[a] = m[a * 4 + 1] - m[a * 4 + 2] - m[a * 4 + 3];
  }
  y[0] = p0[0] + p0[1] + p0[2];
  y[1] = p1[0] + p1[1] + p1[2];
  y[2] = p0[1] - p0[2] - p0[3];
  y[3] = p1[1] - p1[2] - p1[3];
}

LS_SIMD_CLONES void grad_transform(const float* g00, const float* g01, const float* g10, const float* g11, int64_t n,
                                   float* w, int64_t plane) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    f8 o[16];
    grad_tile(load8(g00 + i), load8(g01 + i), load8(g10 + i), load8(g11 + i), o);
    for (int k = 0; k < 16; ++k) store8(w + k * plane + i, o[k]);
  }
  for (; i < n; ++i) {
    float o[16];
    grad_tile(g00[i], g01[i], g10[i], g11[i], o);
    for (int k = 0; k < 16; ++k) w[k * plane + i] = o[k];
  }
}

template <bool kRelu>
LS_SIMD_CLONES void output_transform(const float* m, int64_t plane, int64_t n, float bias, float* y00, float* y01,
                                     float* y10, float* y11) {
  float* out[4] = {y00, y01, y10, y11};
  int64_t i = 0;
  const f8 vb = splat8(bias), zero = splat8(0.f);
  for (; i + 8 <= n; i += 8) {
    f8 mv[16], y[4];
    for (int k = 0; k < 16; ++k) mv[k] = load8(m + k * plane + i);
    output_tile(mv, y);
    for (int k = 0; k < 4; ++k) {
      f8 v = y[k] + vb;
      if (kRelu) v = v > zero ? v : zero;
      store8(out[k] + i, v);
    }
  }
  for (; i < n; ++i) {
    float mv[16], y[4];
    for (int k = 0; k < 16; ++k) mv[k] = m[k * plane + i];
    output_tile(mv, y);
    for (int k = 0; k < 4; ++k) {
      const float v = y[k] + bias;
      out[k][i] = kRelu && v < 0.f ? 0.f : v;
    }
  }
}

LS_SIMD_CLONES void mask_by_positive(float* g, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) g[i] = y[i] > 0.f ? g[i] : 0.f;
}

LS_SIMD_CLONES void add_into(float* acc, const float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] += v[i];
}

// ---------------------------------------------------------------- passes over one chunk

// Fills p8 (ph x pw x 8) with channels [c0, c0 + 8) of one image, zero-padded:
// p8[y + pad][x + pad] = x[y][x]. The plane always holds the whole image:
// pw = 2 tw + 2 >= OW + 2 = W + 2 pad, and likewise ph >= H + 2 pad.
LS_SIMD_CLONES void load_plane8(const ConvGeometry& g, const Tiles& tl, const float* ximg, int64_t c0, float* p8) {
  std::fill_n(p8, tl.ph * tl.pw * 8, 0.f);
  for (int64_t iy = 0; iy < g.h; ++iy)
    interleave_channels(ximg + c0 * g.h * g.w + iy * g.w, g.h * g.w, g.w, p8 + ((iy + g.pad) * tl.pw + g.pad) * 8);
}

// Vt[xi][t][c] = (B^T d B)[xi] for images [n0, n0 + nb) of x, 8 channels at a time.
LS_SIMD_CLONES void load_inputs(const Conv2dShape& s, const Tiles& tl, const float* x, int64_t n0, int64_t nb,
                                int64_t T, const Scratch& sc) {
  const ConvGeometry& g = s.g;
  const int64_t C = g.c, vp = plane_stride(C * T), row8 = tl.pw * 8;
  for (int64_t img = 0; img < nb; ++img)
    for (int64_t c0 = 0; c0 < C; c0 += 8) {
      load_plane8(g, tl, x + (n0 + img) * C * g.h * g.w, c0, sc.p8);
      for (int64_t ti = 0; ti < tl.th; ++ti)
        for (int64_t tj = 0; tj < tl.tw; ++tj) {
          const float* src = sc.p8 + (2 * ti) * row8 + (2 * tj) * 8;
          f8 d[16];
          for (int r = 0; r < 4; ++r)
            for (int q = 0; q < 4; ++q) d[r * 4 + q] = load8(src + r * row8 + q * 8);
          input_tile(d);
          float* out = sc.V + (img * tl.per_image + ti * tl.tw + tj) * C + c0;
          for (int k = 0; k < 16; ++k) store8(out + k * vp, d[k]);
        }
    }
}

void forward_chunk(const Conv2dShape& s, const Tiles& tl, int64_t n0, int64_t nb, const float* x, const float* U,
                   const float* b, float* y, bool relu, const Scratch& sc) {
  const ConvGeometry& g = s.g;
  const int64_t C = g.c, OC = s.oc, T = nb * tl.per_image;
  const int64_t vp = plane_stride(C * T), mp = plane_stride(OC * T);
  load_inputs(s, tl, x, n0, nb, T, sc);
  for (int xi = 0; xi < 16; ++xi)
    sgemm(Trans::N, Trans::T, OC, T, C, 1.f, U + xi * OC * C, C, sc.V + xi * vp, C, 0.f, sc.M + xi * mp, T);
  for (int64_t oc = 0; oc < OC; ++oc) {
    const float bias = b ? b[oc] : 0.f;
    if (relu)
      output_transform<true>(sc.M + oc * T, mp, T, bias, sc.q[0], sc.q[1], sc.q[2], sc.q[3]);
    else
      output_transform<false>(sc.M + oc * T, mp, T, bias, sc.q[0], sc.q[1], sc.q[2], sc.q[3]);
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

// dx for images [n0, n0 + nb) from Zt: each tile's B Z B^T (8 channels at a
// time) is added into a padded channel-interleaved plane, whose interior is
// then transposed back to NCHW.
LS_SIMD_CLONES void scatter_dx(const Conv2dShape& s, const Tiles& tl, int64_t n0, int64_t nb, int64_t T, float* dx,
                               const Scratch& sc) {
  const ConvGeometry& g = s.g;
  const int64_t C = g.c, vp = plane_stride(C * T), row8 = tl.pw * 8;
  for (int64_t img = 0; img < nb; ++img)
    for (int64_t c0 = 0; c0 < C; c0 += 8) {
      std::fill_n(sc.p8, tl.ph * row8, 0.f);
      for (int64_t ti = 0; ti < tl.th; ++ti)
        for (int64_t tj = 0; tj < tl.tw; ++tj) {
          const float* z = sc.V + (img * tl.per_image + ti * tl.tw + tj) * C + c0;
          f8 o[16];
          for (int k = 0; k < 16; ++k) o[k] = load8(z + k * vp);
          dx_tile(o);
          float* dst = sc.p8 + (2 * ti) * row8 + (2 * tj) * 8;
          for (int r = 0; r < 4; ++r)
            for (int q = 0; q < 4; ++q) {
              float* p = dst + r * row8 + q * 8;
              store8(p, load8(p) + o[r * 4 + q]);
            }
        }
      // dx[iy][ix] = plane[iy + pad][ix + pad] (the plane covers the image, see load_plane8)
      float* out = dx + ((n0 + img) * C + c0) * g.h * g.w;
      for (int64_t iy = 0; iy < g.h; ++iy)
        deinterleave_channels(sc.p8 + ((iy + g.pad) * tl.pw + g.pad) * 8, g.w, out + iy * g.w, g.h * g.w);
    }
}

// Adds this chunk's weight-gradient sums into sc.S (and db), writes dx.
void backward_chunk(const Conv2dShape& s, const Tiles& tl, int64_t n0, int64_t nb, const float* x, const float* U,
                    const float* y, float* dy, float* dx, bool with_db, bool relu, const Scratch& sc) {
  const ConvGeometry& g = s.g;
  const int64_t C = g.c, OC = s.oc, T = nb * tl.per_image, P = g.oh * g.ow;
  const int64_t vp = plane_stride(C * T), mp = plane_stride(OC * T);
  float* dyn = dy + n0 * OC * P;
  if (relu) mask_by_positive(dyn, y + n0 * OC * P, nb * OC * P);
  float* db = sc.S + 16 * OC * C;
  float* row = sc.rows;  // one dy row padded with zeros to 2 tw + kSlack
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
          std::copy_n(src, g.ow, row);
          std::fill(row + g.ow, row + 2 * tl.tw + kSlack, 0.f);
          split2(row, tl.tw, sc.q[2 * r] + t0, sc.q[2 * r + 1] + t0);
        }
      }
    }
    grad_transform(sc.q[0], sc.q[1], sc.q[2], sc.q[3], T, sc.M + oc * T, mp);
  }
  load_inputs(s, tl, x, n0, nb, T, sc);
  // S[xi] (OC x C) += W[xi] (OC x T) * Vt[xi] (T x C)
  for (int xi = 0; xi < 16; ++xi)
    sgemm(Trans::N, Trans::N, OC, C, T, 1.f, sc.M + xi * mp, T, sc.V + xi * vp, C, 1.f, sc.S + xi * OC * C, C);
  if (!dx) return;
  // Zt[xi] (T x C) = W[xi]^T (T x OC) * U[xi] (OC x C); Vt is free again.
  for (int xi = 0; xi < 16; ++xi)
    sgemm(Trans::T, Trans::N, T, C, OC, 1.f, sc.M + xi * mp, T, U + xi * OC * C, C, 0.f, sc.V + xi * vp, C);
  scatter_dx(s, tl, n0, nb, T, dx, sc);
}

// dW[oc][c] (+)= G^T S G for S [16][OC][C].
void weights_from_s(const Conv2dShape& s, const float* S, float* dw, bool accumulate) {
  const int64_t C = s.g.c, OC = s.oc, plane = OC * C;
  for (int64_t oc = 0; oc < OC; ++oc)
    for (int64_t c = 0; c < C; ++c) {
      float m[4][4];
      for (int xi = 0; xi < 16; ++xi) m[xi / 4][xi % 4] = S[xi * plane + oc * C + c];
      float t[3][4];  // G^T m
      for (int b = 0; b < 4; ++b) {
        t[0][b] = m[0][b] + 0.5f * (m[1][b] + m[2][b]);
        t[1][b] = 0.5f * (m[1][b] - m[2][b]);
        t[2][b] = 0.5f * (m[1][b] + m[2][b]) + m[3][b];
      }
      float* out = dw + (oc * C + c) * 9;
      for (int a = 0; a < 3; ++a) {
        const float r[3] = {t[a][0] + 0.5f * (t[a][1] + t[a][2]), 0.5f * (t[a][1] - t[a][2]),
                            0.5f * (t[a][1] + t[a][2]) + t[a][3]};
        for (int k = 0; k < 3; ++k) out[a * 3 + k] = accumulate ? out[a * 3 + k] + r[k] : r[k];
      }
    }
}

}  // namespace

bool conv2d_winograd_applies(const Conv2dShape& s) {
  return s.g.kh == 3 && s.g.kw == 3 && s.g.stride == 1 && s.g.pad <= 2 && s.g.oh > 0 && s.g.ow > 0 && s.g.c % 8 == 0;
}

void conv2d_winograd_forward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* b, float* y,
                                 bool relu, Workspace& ws) {
  const Tiles tl = tiles_of(s);
  const int64_t nb = chunk_images(s, tl);
  const int threads = compute_threads(s.n, 1);
  float* U = ws.shared(16 * s.oc * s.g.c);
  transform_filters(s, w, U);
  ws.reserve(threads, scratch_floats(s, tl, nb));
  parallel_ranges(threads, s.n, [&](int t, int64_t n0, int64_t n1) {
    const Scratch sc = carve(ws.floats(t), s, tl, nb);
    for (int64_t n = n0; n < n1; n += nb) forward_chunk(s, tl, n, std::min(nb, n1 - n), x, U, b, y, relu, sc);
  });
}

void conv2d_winograd_backward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* y, float* dy,
                                  float* dx, float* dw, float* db, bool accumulate, bool relu, Workspace& ws) {
  const Tiles tl = tiles_of(s);
  const int64_t nb = chunk_images(s, tl);
  const int threads = compute_threads(s.n, 1);
  const int64_t splane = 16 * s.oc * s.g.c;
  float* U = ws.shared(splane);
  transform_filters(s, w, U);
  ws.reserve(threads, scratch_floats(s, tl, nb));
  parallel_ranges(threads, s.n, [&](int t, int64_t n0, int64_t n1) {
    const Scratch sc = carve(ws.floats(t), s, tl, nb);
    std::fill_n(sc.S, splane + s.oc, 0.f);
    std::fill_n(sc.zeros, 2 * tl.tw + kSlack, 0.f);
    for (int64_t n = n0; n < n1; n += nb)
      backward_chunk(s, tl, n, std::min(nb, n1 - n), x, U, y, dy, dx, db != nullptr, relu, sc);
  });
  float* S = carve(ws.floats(0), s, tl, nb).S;
  for (int t = 1; t < threads; ++t) add_into(S, carve(ws.floats(t), s, tl, nb).S, splane + s.oc);
  weights_from_s(s, S, dw, accumulate);
  if (db)
    for (int64_t oc = 0; oc < s.oc; ++oc) db[oc] = (accumulate ? db[oc] : 0.f) + S[splane + oc];
}

}  // namespace lockstep::ops
