// Token and position embedding kernels: row copies and additions, vectorised
// along the channels.
#include "ops/embedding/embedding_cpu.h"

#include <algorithm>

#include "ops/simd.h"

namespace lockstep::ops {
namespace {

constexpr int64_t kGrainElems = 1 << 15;  // elements per thread, at least
constexpr int64_t kColumnBlock = 16;      // dwte's columns split across threads in 64-byte blocks

LS_SIMD_CLONES void forward_rows(int64_t rb, int64_t re, int64_t t, int64_t c, const int32_t* tokens,
                                 const float* wte, const float* wpe, float* y) {
  for (int64_t r = rb; r < re; ++r) {
    const float* e = wte + static_cast<int64_t>(tokens[r]) * c;
    const float* p = wpe + (r % t) * c;
    float* o = y + r * c;
    for (int64_t i = 0; i < c; ++i) o[i] = e[i] + p[i];
  }
}

LS_INLINE void add_row(int64_t c, const float* src, float* dst) {
  for (int64_t i = 0; i < c; ++i) dst[i] += src[i];
}

// dwpe rows [pb, pe): each the sum over the batch of dy at that position.
LS_SIMD_CLONES void position_rows(int64_t pb, int64_t pe, int64_t b, int64_t t, int64_t c, const float* dy,
                                  float* dwpe, bool accumulate) {
  for (int64_t j = pb; j < pe; ++j) {
    float* o = dwpe + j * c;
    if (!accumulate) std::fill_n(o, c, 0.f);
    if (j >= t) continue;
    for (int64_t i = 0; i < b; ++i) add_row(c, dy + (i * t + j) * c, o);
  }
}

// Columns [c0, c1) of dwte: every position's dy added into its token's row, in position order.
LS_SIMD_CLONES void token_columns(int64_t c0, int64_t c1, int64_t positions, int64_t c, const int32_t* tokens,
                                  const float* dy, float* dwte) {
  for (int64_t r = 0; r < positions; ++r)
    add_row(c1 - c0, dy + r * c + c0, dwte + static_cast<int64_t>(tokens[r]) * c + c0);
}

}  // namespace

int64_t embedding_first_bad_token_cpu(int64_t n, const int32_t* tokens, int64_t vocab) {
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab) return i;
  return -1;
}

void embedding_forward_cpu(int64_t b, int64_t t, int64_t c, const int32_t* tokens, const float* wte, const float* wpe,
                           float* y) {
  const int64_t grain = std::max<int64_t>(1, kGrainElems / std::max<int64_t>(c, 1));
  parallel_for(b * t, grain, [&](int64_t rb, int64_t re) { forward_rows(rb, re, t, c, tokens, wte, wpe, y); });
}

void embedding_backward_cpu(int64_t b, int64_t t, int64_t c, int64_t vocab, int64_t max_t, const int32_t* tokens,
                            const float* dy, float* dwte, float* dwpe, bool accumulate_wte, bool accumulate_wpe) {
  const int64_t row_grain = std::max<int64_t>(1, kGrainElems / std::max<int64_t>(c * std::max<int64_t>(b, 1), 1));
  parallel_for(max_t, row_grain,
               [&](int64_t pb, int64_t pe) { position_rows(pb, pe, b, t, c, dy, dwpe, accumulate_wpe); });
  if (!accumulate_wte)
    parallel_for(vocab * c, kGrainElems, [&](int64_t lo, int64_t hi) { std::fill(dwte + lo, dwte + hi, 0.f); });
  const int64_t positions = b * t;
  const int64_t blocks = (c + kColumnBlock - 1) / kColumnBlock;
  const int64_t block_grain = std::max<int64_t>(1, kGrainElems / std::max<int64_t>(positions * kColumnBlock, 1));
  parallel_for(blocks, block_grain, [&](int64_t kb, int64_t ke) {
    token_columns(kb * kColumnBlock, std::min(c, ke * kColumnBlock), positions, c, tokens, dy, dwte);
  });
}

}  // namespace lockstep::ops
