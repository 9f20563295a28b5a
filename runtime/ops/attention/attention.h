// Causal multi-head self-attention, the core of GPT-2's attention block (its
// QKV and output projections are Linear layers): scores, causal softmax and
// the weighted sum of values, as llm.c's attention_forward_cpu.
//
//   qkv  [B, T, 3C]  GPT-2's fused QKV projection: per position q of every
//                    head, then k, then v; head h's q is channels
//                    [h*D, (h+1)*D) of the q third, D = C / n_head
//   y    [B, T, C]   heads concatenated, head h in channels [h*D, (h+1)*D)
//   lse  [B, n_head, T]  per row the log-sum-exp of the scaled scores: all the
//                    forward leaves for the backward besides qkv and y (no
//                    B x n_head x T x T tensor is kept). A buffer the forward
//                    grows as needed (ops/memory/memory.h, ensure_scratch):
//                    its first B * n_head * T floats are the statistics.
//
//   y_t = sum_{t2 <= t} softmax_t2(q_t . k_t2 / sqrt(D)) v_t2
//
// On the CPU fp32 (attention_cpu.h); `ws` holds the per-thread scratch (one
// [min(T, 64), T] block per thread forward, two backward), which nothing
// keeps from one call to the next. There is no CUDA kernel yet: GPU tensors
// are refused. Dispatch: attention.cpp.
#pragma once

#include <cstdint>

#include "ops/exec.h"
#include "ops/workspace.h"
#include "tensor/tensor.h"

namespace lockstep::ops {

// y and lse from qkv (lse grown to B * n_head * T floats on qkv's device).
void causal_attention_forward(const Tensor& qkv, Tensor& y, Tensor& lse, int64_t n_head, Workspace& ws,
                              const Exec& ex);

// dqkv [B, T, 3C] (overwritten) = dL/dqkv, given dy = dL/dy and the forward's
// y and lse on the same qkv. The probabilities are recomputed from q, k and lse.
void causal_attention_backward(const Tensor& qkv, const Tensor& y, const Tensor& lse, const Tensor& dy, Tensor& dqkv,
                               int64_t n_head, Workspace& ws, const Exec& ex);

}  // namespace lockstep::ops
