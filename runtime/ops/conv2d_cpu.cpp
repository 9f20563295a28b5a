// Conv2d on the CPU: im2col + OpenBLAS sgemm per chunk of images, with the
// bias, the optional ReLU and the ReLU mask applied while the chunk is in cache.
// The batch is split into contiguous parts, one per thread; in backward each
// thread but the first accumulates dW/db into its own partial buffer, and the
// partials are added in thread order (deterministic for a given thread count).
// 1x1 stride-1 unpadded ("pointwise") layers with one image per chunk skip the
// lowering: an image [C, H*W] already is its im2col matrix, so the GEMMs read
// x and write dx in place (no im2col copy, no zeroing, no col2im).
#include "ops/conv2d.h"

#include <algorithm>
#include <cstring>

#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/simd.h"

namespace lockstep::ops {
namespace {
// Chunk images until a GEMM has about this many columns...
constexpr int64_t kMinColumns = 128;
// ...while the chunk's im2col buffer stays within about a core's L2.
constexpr int64_t kChunkBytes = int64_t{1} << 21;

bool pointwise(const ConvGeometry& g) { return g.kh == 1 && g.kw == 1 && g.stride == 1 && g.pad == 0; }

LS_SIMD_CLONES float sum(const float* v, int64_t n) {
  float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += v[i];
    s1 += v[i + 1];
    s2 += v[i + 2];
    s3 += v[i + 3];
  }
  for (; i < n; ++i) s0 += v[i];
  return (s0 + s1) + (s2 + s3);
}

// Floats one thread needs: im2col for a chunk, plus a [OC, nb*P] staging
// matrix when chunks hold several images.
int64_t scratch_floats(const Conv2dShape& s, int64_t nb) {
  return s.g.k() * nb * s.g.p() + (nb > 1 ? s.oc * nb * s.g.p() : 0);
}

void forward_range(const Conv2dShape& s, int64_t n_begin, int64_t n_end, int64_t nb_max, const float* x,
                   const float* w, const float* b, float* y, bool relu, float* scratch) {
  const ConvGeometry& g = s.g;
  const int64_t K = g.k(), P = g.p(), in_img = g.c * g.h * g.w, out_img = s.oc * P;
  float* col = scratch;
  float* tmp = scratch + K * nb_max * P;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += nb_max) {
    const int64_t nb = std::min(nb_max, n_end - n0), ld = nb * P;
    if (nb == 1) {
      const float* xcol = x + n0 * in_img;  // [K, P] as it stands for a pointwise layer
      if (!pointwise(g)) {
        im2col(g, xcol, col, ld);
        xcol = col;
      }
      float* yn = y + n0 * out_img;
      for (int64_t c = 0; c < s.oc; ++c) std::fill_n(yn + c * P, P, b ? b[c] : 0.f);
      sgemm(Trans::N, Trans::N, s.oc, P, K, 1.f, w, K, xcol, ld, 1.f, yn, P);  // beta 1: bias already in y
    } else {
      for (int64_t j = 0; j < nb; ++j) im2col(g, x + (n0 + j) * in_img, col + j * P, ld);
      for (int64_t c = 0; c < s.oc; ++c) std::fill_n(tmp + c * ld, ld, b ? b[c] : 0.f);
      sgemm(Trans::N, Trans::N, s.oc, ld, K, 1.f, w, K, col, ld, 1.f, tmp, ld);
      for (int64_t j = 0; j < nb; ++j)
        for (int64_t c = 0; c < s.oc; ++c)
          std::memcpy(y + (n0 + j) * out_img + c * P, tmp + c * ld + j * P, static_cast<size_t>(P) * sizeof(float));
    }
    if (relu) relu_forward_serial(nb * out_img, y + n0 * out_img, y + n0 * out_img);
  }
}

// Accumulates dW/db (into dw/db, which the caller initialised) and writes dx.
void backward_range(const Conv2dShape& s, int64_t n_begin, int64_t n_end, int64_t nb_max, const float* x,
                    const float* w, const float* y, float* dy, float* dx, float* dw, float* db, bool relu,
                    float* scratch) {
  const ConvGeometry& g = s.g;
  const int64_t K = g.k(), P = g.p(), in_img = g.c * g.h * g.w, out_img = s.oc * P;
  float* col = scratch;
  float* dyc = scratch + K * nb_max * P;  // [OC, nb*P] gathered dy when nb > 1
  for (int64_t n0 = n_begin; n0 < n_end; n0 += nb_max) {
    const int64_t nb = std::min(nb_max, n_end - n0), ld = nb * P;
    if (relu) relu_backward_serial(nb * out_img, y + n0 * out_img, dy + n0 * out_img, dy + n0 * out_img);
    const float* dY;  // [OC, ld]
    if (nb == 1) {
      dY = dy + n0 * out_img;
    } else {
      for (int64_t j = 0; j < nb; ++j)
        for (int64_t c = 0; c < s.oc; ++c)
          std::memcpy(dyc + c * ld + j * P, dy + (n0 + j) * out_img + c * P, static_cast<size_t>(P) * sizeof(float));
      dY = dyc;
    }
    if (db)
      for (int64_t c = 0; c < s.oc; ++c) db[c] += sum(dY + c * ld, ld);
    const bool direct = nb == 1 && pointwise(g);  // x is col; dx is dcol
    const float* xcol = direct ? x + n0 * in_img : col;
    if (!direct)
      for (int64_t j = 0; j < nb; ++j) im2col(g, x + (n0 + j) * in_img, col + j * P, ld);
    // dW[OC, K] += dY[OC, ld] * col[K, ld]^T
    sgemm(Trans::N, Trans::T, s.oc, K, ld, 1.f, dY, ld, xcol, ld, 1.f, dw, K);
    if (dx && direct) {
      sgemm(Trans::T, Trans::N, K, ld, s.oc, 1.f, w, K, dY, ld, 0.f, dx + n0 * in_img, ld);
    } else if (dx) {
      // dcol[K, ld] = W[OC, K]^T * dY[OC, ld]; col is free again, reuse it.
      sgemm(Trans::T, Trans::N, K, ld, s.oc, 1.f, w, K, dY, ld, 0.f, col, ld);
      for (int64_t j = 0; j < nb; ++j) {
        float* dxn = dx + (n0 + j) * in_img;
        std::fill_n(dxn, in_img, 0.f);
        col2im(g, col + j * P, ld, dxn);
      }
    }
  }
}

}  // namespace

ConvAlgo conv2d_choose(const Conv2dShape& s, ConvAlgo requested) {
  // Winograd's GEMMs have K = input channels (forward) or output channels
  // (data gradient); below this they run too far under the sgemm peak to win.
  constexpr int64_t kMinChannels = 16;
  // Each of Winograd's P products streams a C x OC filter plane past the
  // batch's tiles; with few tiles (a 2x2 output is one F(2x2) tile per image)
  // that streaming, and the filter transforms, cost more than the multiplies
  // saved. Measured on resnet50's 2x2 stage (3x3, 512 -> 512, 2 threads,
  // 2026-11-23, fwd + bwd): 32 tiles (batch 32) 31.2 ms Winograd vs 28.7 ms
  // im2col; 64 tiles (batch 64) about even (56 vs 58); 256 tiles 38 vs 50.
  constexpr int64_t kMinTiles = 64;
  if (requested == ConvAlgo::Im2col || !conv2d_winograd_applies(s)) return ConvAlgo::Im2col;
  if (requested == ConvAlgo::Winograd) return ConvAlgo::Winograd;
  const int64_t tiles = s.n * conv2d_winograd_tiles(s, 2);
  return s.g.c >= kMinChannels && s.oc >= kMinChannels && tiles >= kMinTiles ? ConvAlgo::Winograd
                                                                             : ConvAlgo::Im2col;
}

int64_t conv2d_chunk(const Conv2dShape& s) {
  const int64_t P = std::max<int64_t>(s.g.p(), 1);
  const int64_t per_image = std::max<int64_t>(1, s.g.k() * P * static_cast<int64_t>(sizeof(float)));
  const int64_t want = (kMinColumns + P - 1) / P;
  return std::clamp<int64_t>(std::min(want, kChunkBytes / per_image), 1, std::max<int64_t>(s.n, 1));
}

void conv2d_forward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* b, float* y, bool relu,
                        Workspace& ws) {
  const int64_t nb = conv2d_chunk(s);
  const int threads = compute_threads(s.n, 1);
  ws.reserve(threads, scratch_floats(s, nb));
  parallel_ranges(threads, s.n, [&](int t, int64_t n0, int64_t n1) {
    forward_range(s, n0, n1, nb, x, w, b, y, relu, ws.floats(t));
  });
}

void conv2d_backward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* y, float* dy, float* dx,
                         float* dw, float* db, bool accumulate, bool relu, Workspace& ws) {
  const int64_t nb = conv2d_chunk(s), K = s.g.k();
  const int threads = compute_threads(s.n, 1);
  // Per thread: scratch, then (threads > 0) a partial dW [OC, K] and db [OC].
  const int64_t scratch = scratch_floats(s, nb);
  ws.reserve(threads, scratch + s.oc * K + s.oc);
  // Thread 0 accumulates straight into dW/db and clears them first, inside the
  // parallel region (no range runs for an empty batch: cleared here then).
  const auto clear_grads = [&] {
    std::fill_n(dw, s.oc * K, 0.f);
    if (db) std::fill_n(db, s.oc, 0.f);
  };
  if (s.n == 0 && !accumulate) clear_grads();
  parallel_ranges(threads, s.n, [&](int t, int64_t n0, int64_t n1) {
    float* buf = ws.floats(t);
    float* pdw = dw;
    float* pdb = db;
    if (t > 0) {
      pdw = buf + scratch;
      pdb = db ? pdw + s.oc * K : nullptr;
      std::fill_n(pdw, s.oc * K + s.oc, 0.f);
    } else if (!accumulate) {
      clear_grads();
    }
    backward_range(s, n0, n1, nb, x, w, y, dy, dx, pdw, pdb, relu, buf);
  });
  // Partials added in thread order for every element (split over elements: the same sums).
  if (threads > 1)
    parallel_for(s.oc * K, int64_t{1} << 14, [&](int64_t e0, int64_t e1) {
      for (int t = 1; t < threads; ++t) add_inplace_serial(e1 - e0, ws.floats(t) + scratch + e0, dw + e0);
    });
  if (db)
    for (int t = 1; t < threads; ++t) add_inplace_serial(s.oc, ws.floats(t) + scratch + s.oc * K, db);
}

}  // namespace lockstep::ops
