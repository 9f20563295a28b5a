// Fully connected layer on the tensors' device:
//   x [B, in]   w [out, in] fp32 master   b [out] fp32 (nullable)   y [B, out]
// (x [B, ..., in] -> y [B, ..., out] too: the leading dimensions are the rows)
// forward: y = x w^T + b, then ReLU when `relu` (fused).
// backward: with `relu`, dy is first masked by y > 0 (in place);
//   dw (+)= dy^T x,  db (+)= column sums of dy (db nullable),  dx = dy w (dx nullable).
// `accumulate`: dw and db are added to instead of overwritten.
// CPU: fp32 (linear_cpu.h). GPU: fp32, or bf16/fp16 activations (mixed
// precision) with the weight rounded to their type into `w16` by each forward
// and reused by backward; bias and gradients stay fp32 (linear_cuda.h).
// Dispatch: linear.cpp.
#pragma once

#include "ops/exec.h"
#include "tensor/tensor.h"

namespace lockstep::ops {

void linear_forward(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, bool relu, Tensor& w16,
                    const Exec& ex);
void linear_backward(const Tensor& x, const Tensor& w, const Tensor& w16, const Tensor& y, const Tensor& dy,
                     Tensor* dx, Tensor& dw, Tensor* db, bool accumulate, bool relu, const Exec& ex);

}  // namespace lockstep::ops
