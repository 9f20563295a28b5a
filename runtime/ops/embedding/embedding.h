// Token and position embedding, GPT-2's wte and wpe (llm.c's encoder), on the
// tensors' device:
//   tokens [B, T] int32 in [0, V)   wte [V, C]   wpe [maxT, C], T <= maxT   y [B, T, C]
// forward: y[b, t] = wte[tokens[b, t]] + wpe[t].
// backward: no gradient for the tokens; dwte[v] (+)= the sum of dy[b, t] over
//   the positions whose token is v, dwpe[t] (+)= the sum of dy[b, t] over b, in
//   (b, t) order; rows no position touches are zeroed, or kept with `accumulate`.
// A token outside [0, V) or a sequence longer than maxT is an InputError that
// names the value (and the token's position).
// CPU: fp32 (embedding_cpu.h). GPU: no kernel yet; GPU tensors are refused
// with an error. Dispatch: embedding.cpp.
#pragma once

#include "ops/exec.h"
#include "tensor/tensor.h"

namespace lockstep::ops {

void embedding_forward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, Tensor& y, const Exec& ex);
// accumulate_wte / accumulate_wpe: each table's gradient added to, or overwritten.
void embedding_backward(const Tensor& tokens, const Tensor& dy, Tensor& dwte, Tensor& dwpe, bool accumulate_wte,
                        bool accumulate_wpe, const Exec& ex);

}  // namespace lockstep::ops
