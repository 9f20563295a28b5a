// Causal multi-head self-attention core on raw fp32 arrays (CPU), llm.c's
// attention_forward_cpu semantics, with a backward that keeps no attention
// matrix: it recomputes the probabilities from q, k and the forward's per-row
// log-sum-exp.
//
//   qkv   [B, T, 3C]  per position: q of every head, then k, then v; head h's
//                     q is channels [h*D, (h+1)*D) of the q third, D = C / NH
//   y     [B, T, C]   heads concatenated, head h in channels [h*D, (h+1)*D)
//   lse   [B, NH, T]  log sum_{t2 <= t} exp(s[t, t2]), the softmax statistics
//   s[t, t2] = q_t . k_t2 / sqrt(D) for t2 <= t (causal), P = softmax over t2
//   y_t = sum_{t2 <= t} P[t, t2] v_t2
//
// The products are OpenBLAS GEMMs on strided views of qkv (row stride 3C, no
// copies). Each (b, h) pair runs on one thread, with that thread's scratch,
// and the pairs are split over the OpenMP threads: results do not depend on
// the thread count. Rows run in chunks of kAttentionRowChunk: a chunk's
// scores cover columns [0, chunk end) only, so the products skip the masked
// region above the diagonal blocks.
#pragma once

#include <cstdint>

#include "ops/workspace.h"

namespace lockstep::ops {

struct AttentionShape {
  int64_t b = 0, t = 0, c = 0, n_head = 1;
  int64_t head_dim() const { return c / n_head; }
};

// Rows of the score matrix computed at a time.
inline constexpr int64_t kAttentionRowChunk = 64;

// Floats of per-thread scratch a forward or a backward uses: one (forward)
// or two (backward) [min(T, chunk), T] blocks.
int64_t causal_attention_scratch_floats(const AttentionShape& s, bool backward);

// y and lse from qkv.
void causal_attention_forward_cpu(const AttentionShape& s, const float* qkv, float* y, float* lse, Workspace& ws);

// dqkv (overwritten) from qkv, the forward's y and lse, and dy = dL/dy:
//   dP = dY V^T, dV = P^T dY, dS = P o (dP - rowsum(dY o Y)),
//   dQ = dS K / sqrt(D), dK = dS^T Q / sqrt(D).
void causal_attention_backward_cpu(const AttentionShape& s, const float* qkv, const float* y, const float* lse,
                                   const float* dy, float* dqkv, Workspace& ws);

}  // namespace lockstep::ops
