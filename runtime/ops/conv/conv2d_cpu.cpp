// Conv2d on the CPU: im2col + OpenBLAS sgemm per chunk of images, with the
// bias, the optional ReLU and the ReLU mask applied while the chunk is in cache.
// The batch is split into contiguous parts, one per thread; in backward each
// thread but the first accumulates dW/db into its own partial buffer, and the
// partials are added in thread order (deterministic for a given thread count).
// 1x1 stride-1 unpadded ("pointwise") layers with one image per chunk skip the
// lowering: an image [C, H*W] already is its im2col matrix, so the GEMMs read
// x and write dx in place (no im2col copy, no zeroing, no col2im).
// Layers with few output pixels per thread split output channels instead of
// images (forward_split / backward_split).
#include "ops/conv/conv2d_cpu.h"

#include <algorithm>
#include <cstring>

#include "ops/elementwise/elementwise_cpu.h"
#include "ops/gemm/gemm.h"
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

// Output-channel split, for layers whose images have few output pixels: the
// whole batch is lowered into one col [K, n*P], and the threads split the
// GEMMs' rows (output channels; in backward also the data gradient's K rows)
// instead of the images. Split by images, each thread would stream all of W
// past its few columns and repack it for every chunk (resnet50's 2x2 stage at
// batch 32: 64 columns a thread against a 2048 x 512 W).
int64_t split_floats(const Conv2dShape& s) { return (s.g.k() + s.oc) * s.n * s.g.p(); }

void forward_split(const Conv2dShape& s, int threads, const float* x, const float* w, const float* b, float* y,
                   bool relu, float* buf) {
  const ConvGeometry& g = s.g;
  const int64_t K = g.k(), P = g.p(), L = s.n * P, in_img = g.c * g.h * g.w, out_img = s.oc * P;
  float* col = buf;          // [K, L]
  float* tmp = buf + K * L;  // [OC, L]
  parallel_ranges(threads, s.n, [&](int, int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) im2col(g, x + n * in_img, col + n * P, L);
  });
  parallel_ranges(threads, s.oc, [&](int, int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) std::fill_n(tmp + c * L, L, b ? b[c] : 0.f);
    sgemm(Trans::N, Trans::N, c1 - c0, L, K, 1.f, w + c0 * K, K, col, L, 1.f, tmp + c0 * L, L);
    for (int64_t n = 0; n < s.n; ++n) {
      float* yn = y + n * out_img;
      for (int64_t c = c0; c < c1; ++c) std::memcpy(yn + c * P, tmp + c * L + n * P, static_cast<size_t>(P) * sizeof(float));
      if (relu) relu_forward_serial((c1 - c0) * P, yn + c0 * P, yn + c0 * P);
    }
  });
}

void backward_split(const Conv2dShape& s, int threads, const float* x, const float* w, const float* y, float* dy,
                    float* dx, float* dw, float* db, bool accumulate, bool relu, float* buf) {
  const ConvGeometry& g = s.g;
  const int64_t K = g.k(), P = g.p(), L = s.n * P, in_img = g.c * g.h * g.w, out_img = s.oc * P;
  float* col = buf;         // [K, L]: x lowered, then dcol
  float* dY = buf + K * L;  // [OC, L]
  parallel_ranges(threads, s.n, [&](int, int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      float* dyn = dy + n * out_img;
      if (relu) relu_backward_serial(out_img, y + n * out_img, dyn, dyn);
      for (int64_t c = 0; c < s.oc; ++c) std::memcpy(dY + c * L + n * P, dyn + c * P, static_cast<size_t>(P) * sizeof(float));
      im2col(g, x + n * in_img, col + n * P, L);
    }
  });
  // dW[OC, K] (+)= dY[OC, L] * col[K, L]^T, rows split.
  parallel_ranges(threads, s.oc, [&](int, int64_t c0, int64_t c1) {
    if (db)
      for (int64_t c = c0; c < c1; ++c) db[c] = (accumulate ? db[c] : 0.f) + sum(dY + c * L, L);
    sgemm(Trans::N, Trans::T, c1 - c0, K, L, 1.f, dY + c0 * L, L, col, L, accumulate ? 1.f : 0.f, dw + c0 * K, K);
  });
  if (!dx) return;
  // dcol[K, L] = W[OC, K]^T * dY[OC, L] into col (read by nothing now), K rows split.
  parallel_ranges(threads, K, [&](int, int64_t k0, int64_t k1) {
    sgemm(Trans::T, Trans::N, k1 - k0, L, s.oc, 1.f, w + k0, K, dY, L, 0.f, col + k0 * L, L);
  });
  parallel_ranges(threads, s.n, [&](int, int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      float* dxn = dx + n * in_img;
      std::fill_n(dxn, in_img, 0.f);
      col2im(g, col + n * P, L, dxn);
    }
  });
}

// Below this many GEMM columns per thread (images per thread x output
// pixels), the split by output channels wins. resnet50 at 64x64, batch 32,
// 2 threads, forward + backward per layer (2026-11-24): its 2x2 stage (64
// columns a thread) 47.7 -> 44.0 ms over its five layer shapes; at batch 64
// (128 columns) the split lost on every 1x1 layer (e.g. 2048 -> 512: 11.1 ->
// 13.2 ms), as on the 4x4 stage at batch 32 (128 columns).
constexpr int64_t kSplitColumns = 128;

bool split_channels(const Conv2dShape& s, int threads) {
  return threads > 1 && s.n / threads * s.g.p() < kSplitColumns;
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

bool conv2d_split_channels(const Conv2dShape& s, int threads) { return split_channels(s, threads); }

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
  if (split_channels(s, threads)) {
    ws.reserve(1, split_floats(s));
    forward_split(s, threads, x, w, b, y, relu, ws.floats(0));
    return;
  }
  ws.reserve(threads, scratch_floats(s, nb));
  parallel_ranges(threads, s.n, [&](int t, int64_t n0, int64_t n1) {
    forward_range(s, n0, n1, nb, x, w, b, y, relu, ws.floats(t));
  });
}

void conv2d_backward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* y, float* dy, float* dx,
                         float* dw, float* db, bool accumulate, bool relu, Workspace& ws) {
  const int64_t nb = conv2d_chunk(s), K = s.g.k();
  const int threads = compute_threads(s.n, 1);
  if (s.n > 0 && split_channels(s, threads)) {
    ws.reserve(1, split_floats(s));
    backward_split(s, threads, x, w, y, dy, dx, dw, db, accumulate, relu, ws.floats(0));
    return;
  }
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
