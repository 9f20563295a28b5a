// Causal self-attention kernels (CPU): per (b, h) pair, the scores, softmax
// and products of one chunk of rows at a time, in the calling thread's scratch;
// the softmax's exps are ops/simd_math.h's vector exp8.
#include "ops/attention/attention_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "ops/gemm/gemm.h"
#include "ops/simd.h"
#include "ops/simd_math.h"

namespace lockstep::ops {
namespace {

// Rows of the per-thread score blocks: a chunk, or all of a shorter sequence.
int64_t block_rows(const AttentionShape& s) { return std::min(s.t, kAttentionRowChunk); }

void check_shape(const AttentionShape& s) {
  LS_CHECK(s.b >= 0 && s.t >= 0 && s.n_head > 0 && s.c > 0 && s.c % s.n_head == 0,
           "causal attention: {} channels in {} heads for [{}, {}] positions", s.c, s.n_head, s.b, s.t);
  // The GEMMs' sizes and row strides (3C) are 32-bit.
  LS_CHECK(s.t < (int64_t{1} << 31) && 3 * s.c < (int64_t{1} << 31), "causal attention: {} positions of {} channels",
           s.t, s.c);
}

// row[j] = exp(row[j] - shift) for j < n, in place; returns their sum (fp32
// lanes, then the lanes added in a fixed order).
LS_SIMD_CLONES float exp_shifted_row(float* row, int64_t n, float shift) {
  const f8 m = splat8(shift);
  f8 acc{};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const f8 e = exp8(load8(row + j) - m);
    store8(row + j, e);
    acc += e;
  }
  if (j < n) {
    // Padding lanes are masked to zero so they add nothing to the sum.
    f8 e = exp8(load_part8(row + j, n - j) - m);
    for (int64_t k = n - j; k < 8; ++k) e[k] = 0.f;
    store_part8(row + j, e, n - j);
    acc += e;
  }
  return hsum8(acc);
}

LS_SIMD_CLONES float max_of_row(const float* row, int64_t n) { return row_max8(row, n); }

// Softmax over row[0, n) in place, row[n, width) set to zero (the masked
// positions t2 > t); returns log sum_j exp(row[j]), the max subtracted first.
float softmax_causal_row(float* row, int64_t n, int64_t width) {
  const float mx = max_of_row(row, n);
  const float sum = exp_shifted_row(row, n, mx);
  const float inv = 1.f / sum;
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
  for (int64_t j = n; j < width; ++j) row[j] = 0.f;
  return mx + std::log(sum);
}

// The views of one (b, h) pair: q, k, v and dq, dk, dv rows are 3C apart,
// y and dy rows C apart.
struct PairViews {
  int64_t t, d, ld, ldy;
  float scale;
  int64_t q_off, y_off, lse_off;
};

PairViews pair_views(const AttentionShape& s, int64_t pair) {
  const int64_t b = pair / s.n_head, h = pair % s.n_head, d = s.head_dim();
  return {s.t, d, 3 * s.c, s.c, 1.f / std::sqrt(static_cast<float>(d)), b * s.t * 3 * s.c + h * d, b * s.t * s.c + h * d,
          pair * s.t};
}

void forward_pair(const AttentionShape& s, int64_t pair, const float* qkv, float* y, float* lse, float* p) {
  const PairViews w = pair_views(s, pair);
  const float *q = qkv + w.q_off, *k = q + s.c, *v = q + 2 * s.c;
  float* yh = y + w.y_off;
  float* l = lse + w.lse_off;
  for (int64_t r0 = 0; r0 < w.t; r0 += kAttentionRowChunk) {
    const int64_t r1 = std::min(w.t, r0 + kAttentionRowChunk), m = r1 - r0;
    // S [m, r1] = Q[r0, r1) K[0, r1)^T / sqrt(D)
    sgemm(Trans::N, Trans::T, m, r1, w.d, w.scale, q + r0 * w.ld, w.ld, k, w.ld, 0.f, p, r1);
    for (int64_t i = 0; i < m; ++i) l[r0 + i] = softmax_causal_row(p + i * r1, r0 + i + 1, r1);
    // Y[r0, r1) = P V[0, r1)
    sgemm(Trans::N, Trans::N, m, w.d, r1, 1.f, p, r1, v, w.ld, 0.f, yh + r0 * w.ldy, w.ldy);
  }
}

void backward_pair(const AttentionShape& s, int64_t pair, const float* qkv, const float* y, const float* lse,
                   const float* dy, float* dqkv, float* p, float* g) {
  const PairViews w = pair_views(s, pair);
  const float *q = qkv + w.q_off, *k = q + s.c, *v = q + 2 * s.c;
  float *dq = dqkv + w.q_off, *dk = dq + s.c, *dv = dq + 2 * s.c;
  const float* yh = y + w.y_off;
  const float* dyh = dy + w.y_off;
  const float* l = lse + w.lse_off;
  // dK and dV sum over the chunks; dQ is written chunk by chunk.
  for (int64_t t = 0; t < w.t; ++t) {
    std::memset(dk + t * w.ld, 0, static_cast<size_t>(w.d) * sizeof(float));
    std::memset(dv + t * w.ld, 0, static_cast<size_t>(w.d) * sizeof(float));
  }
  for (int64_t r0 = 0; r0 < w.t; r0 += kAttentionRowChunk) {
    const int64_t r1 = std::min(w.t, r0 + kAttentionRowChunk), m = r1 - r0;
    // P [m, r1] = exp(S - lse) on and below the diagonal, 0 above it.
    sgemm(Trans::N, Trans::T, m, r1, w.d, w.scale, q + r0 * w.ld, w.ld, k, w.ld, 0.f, p, r1);
    for (int64_t i = 0; i < m; ++i) {
      float* row = p + i * r1;
      const int64_t n = r0 + i + 1;
      const float li = l[r0 + i];
      exp_shifted_row(row, n, li);
      for (int64_t j = n; j < r1; ++j) row[j] = 0.f;
    }
    // dP [m, r1] = dY[r0, r1) V[0, r1)^T
    sgemm(Trans::N, Trans::T, m, r1, w.d, 1.f, dyh + r0 * w.ldy, w.ldy, v, w.ld, 0.f, g, r1);
    // dV[0, r1) += P^T dY[r0, r1)
    sgemm(Trans::T, Trans::N, r1, w.d, m, 1.f, p, r1, dyh + r0 * w.ldy, w.ldy, 1.f, dv, w.ld);
    // dS = P o (dP - rowsum(dY o Y)) on and below the diagonal, 0 above it.
    for (int64_t i = 0; i < m; ++i) {
      const float* pr = p + i * r1;
      float* gr = g + i * r1;
      const float* yr = yh + (r0 + i) * w.ldy;
      const float* dyr = dyh + (r0 + i) * w.ldy;
      float dot = 0.f;
      for (int64_t e = 0; e < w.d; ++e) dot += dyr[e] * yr[e];
      const int64_t n = r0 + i + 1;
      for (int64_t j = 0; j < n; ++j) gr[j] = pr[j] * (gr[j] - dot);
      for (int64_t j = n; j < r1; ++j) gr[j] = 0.f;
    }
    // dQ[r0, r1) = dS K[0, r1) / sqrt(D);  dK[0, r1) += dS^T Q[r0, r1) / sqrt(D)
    sgemm(Trans::N, Trans::N, m, w.d, r1, w.scale, g, r1, k, w.ld, 0.f, dq + r0 * w.ld, w.ld);
    sgemm(Trans::T, Trans::N, r1, w.d, m, w.scale, g, r1, q + r0 * w.ld, w.ld, 1.f, dk, w.ld);
  }
}

}  // namespace

int64_t causal_attention_scratch_floats(const AttentionShape& s, bool backward) {
  return (backward ? 2 : 1) * block_rows(s) * s.t;
}

void causal_attention_forward_cpu(const AttentionShape& s, const float* qkv, float* y, float* lse, Workspace& ws) {
  check_shape(s);
  const int64_t pairs = s.b * s.n_head;
  const int threads = compute_threads(pairs, 1);
  ws.reserve(threads, causal_attention_scratch_floats(s, false));
  parallel_ranges(threads, pairs, [&](int th, int64_t i0, int64_t i1) {
    float* p = ws.floats(th);
    for (int64_t i = i0; i < i1; ++i) forward_pair(s, i, qkv, y, lse, p);
  });
}

void causal_attention_backward_cpu(const AttentionShape& s, const float* qkv, const float* y, const float* lse,
                                   const float* dy, float* dqkv, Workspace& ws) {
  check_shape(s);
  const int64_t pairs = s.b * s.n_head;
  const int threads = compute_threads(pairs, 1);
  ws.reserve(threads, causal_attention_scratch_floats(s, true));
  const int64_t block = block_rows(s) * s.t;
  parallel_ranges(threads, pairs, [&](int th, int64_t i0, int64_t i1) {
    float* p = ws.floats(th);
    for (int64_t i = i0; i < i1; ++i) backward_pair(s, i, qkv, y, lse, dy, dqkv, p, p + block);
  });
}

}  // namespace lockstep::ops
