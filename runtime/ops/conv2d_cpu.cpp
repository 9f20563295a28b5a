// Conv2d on the CPU: im2col + OpenBLAS sgemm per chunk of images, with the
// bias, the optional ReLU and the ReLU mask applied while the chunk is in cache.
#include "ops/conv2d.h"

#include <algorithm>
#include <cstring>

#include "ops/gemm.h"
#include "ops/simd.h"

namespace lockstep::ops {
namespace {
// Chunk images until a GEMM has about this many columns...
constexpr int64_t kMinColumns = 256;
// ...while the chunk's im2col buffer stays within about a core's L2.
constexpr int64_t kChunkBytes = int64_t{1} << 21;

LS_SIMD_CLONES void relu_inplace(float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = v[i] > 0.f ? v[i] : 0.f;
}

LS_SIMD_CLONES void mask_by_positive(float* g, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) g[i] = y[i] > 0.f ? g[i] : 0.f;
}

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
}  // namespace

int64_t conv2d_chunk(const Conv2dShape& s) {
  const int64_t P = std::max<int64_t>(s.g.p(), 1);
  const int64_t per_image = std::max<int64_t>(1, s.g.k() * P * static_cast<int64_t>(sizeof(float)));
  const int64_t want = (kMinColumns + P - 1) / P;
  return std::clamp<int64_t>(std::min(want, kChunkBytes / per_image), 1, std::max<int64_t>(s.n, 1));
}

void conv2d_forward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* b, float* y, bool relu,
                        Workspace& ws) {
  const ConvGeometry& g = s.g;
  const int64_t K = g.k(), P = g.p(), in_img = g.c * g.h * g.w, out_img = s.oc * P;
  const int64_t nb_max = conv2d_chunk(s);
  float* col = ws.floats(K * nb_max * P + (nb_max > 1 ? s.oc * nb_max * P : 0));
  float* tmp = col + K * nb_max * P;  // [OC, nb*P] when nb > 1
  for (int64_t n0 = 0; n0 < s.n; n0 += nb_max) {
    const int64_t nb = std::min(nb_max, s.n - n0), ld = nb * P;
    for (int64_t j = 0; j < nb; ++j) im2col(g, x + (n0 + j) * in_img, col + j * P, ld);
    if (nb == 1) {
      float* yn = y + n0 * out_img;
      for (int64_t c = 0; c < s.oc; ++c) std::fill_n(yn + c * P, P, b ? b[c] : 0.f);
      sgemm(Trans::N, Trans::N, s.oc, P, K, 1.f, w, K, col, ld, 1.f, yn, P);  // beta 1: bias already in y
    } else {
      for (int64_t c = 0; c < s.oc; ++c) std::fill_n(tmp + c * ld, ld, b ? b[c] : 0.f);
      sgemm(Trans::N, Trans::N, s.oc, ld, K, 1.f, w, K, col, ld, 1.f, tmp, ld);
      for (int64_t j = 0; j < nb; ++j)
        for (int64_t c = 0; c < s.oc; ++c)
          std::memcpy(y + (n0 + j) * out_img + c * P, tmp + c * ld + j * P, static_cast<size_t>(P) * sizeof(float));
    }
    if (relu) relu_inplace(y + n0 * out_img, nb * out_img);
  }
}

void conv2d_backward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* y, float* dy, float* dx,
                         float* dw, float* db, bool accumulate, bool relu, Workspace& ws) {
  const ConvGeometry& g = s.g;
  const int64_t K = g.k(), P = g.p(), in_img = g.c * g.h * g.w, out_img = s.oc * P;
  const int64_t nb_max = conv2d_chunk(s);
  float* col = ws.floats(K * nb_max * P + (nb_max > 1 ? s.oc * nb_max * P : 0));
  float* dyc = col + K * nb_max * P;  // [OC, nb*P] gathered dy when nb > 1
  if (!accumulate) {
    std::fill_n(dw, s.oc * K, 0.f);
    if (db) std::fill_n(db, s.oc, 0.f);
  }
  for (int64_t n0 = 0; n0 < s.n; n0 += nb_max) {
    const int64_t nb = std::min(nb_max, s.n - n0), ld = nb * P;
    if (relu) mask_by_positive(dy + n0 * out_img, y + n0 * out_img, nb * out_img);
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
    for (int64_t j = 0; j < nb; ++j) im2col(g, x + (n0 + j) * in_img, col + j * P, ld);
    // dW[OC, K] += dY[OC, ld] * col[K, ld]^T
    sgemm(Trans::N, Trans::T, s.oc, K, ld, 1.f, dY, ld, col, ld, 1.f, dw, K);
    if (dx) {
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

}  // namespace lockstep::ops
