// Layer normalisation over the last dimension, GPT-2's (llm.c's layout and
// semantics), on the tensors' device:
//   x [N, C] -> y [N, C]   weight, bias [C]   mean, rstd: N per-row statistics
// (the caller flattens leading dimensions into rows: [B, T, C] is N = B * T).
// forward: per row, y = (x - mean) * rstd * weight + bias with
//   rstd = 1 / sqrt(var + eps), var the biased variance of the row; mean and
//   rstd are the caller's scratch, grown as needed (fp32, on x's device), and
//   their first N elements keep the rows' statistics for backward.
// backward: from the forward's x, mean and rstd,
//   dweight (+)= sum over rows of norm * dy, dbias (+)= sum over rows of dy,
//   dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))   (dx nullable)
//   with norm = (x - mean) * rstd and dnorm = weight * dy per row;
//   `accumulate`: dweight and dbias are added to instead of overwritten.
// CPU: fp32 (layernorm_cpu.h). GPU: no kernel yet; GPU tensors are refused
// with an error. Dispatch: layernorm.cpp.
#pragma once

#include "ops/exec.h"
#include "tensor/tensor.h"

namespace lockstep::ops {

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y, Tensor& mean,
                       Tensor& rstd, const Exec& ex);
void layernorm_backward(const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                        const Tensor& dy, Tensor* dx, Tensor& dweight, Tensor& dbias, bool accumulate,
                        const Exec& ex);

}  // namespace lockstep::ops
