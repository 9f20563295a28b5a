// Softmax cross-entropy over class logits on the tensors' device:
//   logits [B, C], labels [B] int32 in [0, C), smoothing eps in [0, 1).
// CPU: fp32 logits (softmax_xent_cpu.h). GPU: fp32, bf16 or fp16 logits,
// fp32/fp64 math, queued on the context's stream (softmax_xent_cuda.h).
// Dispatch: softmax_xent.cpp.
#pragma once

#include "ops/exec.h"
#include "ops/loss/softmax_xent_cpu.h"
#include "tensor/tensor.h"

namespace lockstep::ops {

// Device-side sums a GPU forward adds into, so the host reads them only when
// it logs: loss_sum [1] F64 and correct [1] I64, and per-row scratch [B].
struct XentDeviceSums {
  Tensor loss_sum, correct;
  Tensor row_loss, row_correct;
};

// The batch's summed loss and hits. Host logits: returned. GPU logits: added
// into `dev` (made on first use on the logits' device; it must not be null),
// and the returned result is zero.
XentResult softmax_xent_forward(const Tensor& logits, const Tensor& labels, float smoothing, XentDeviceSums* dev,
                                const Exec& ex);

// dlogits = (softmax(logits) - q) * scale (times *loss_scale_dev when that
// device pointer is given: GPU only), in the logits' type and device.
void softmax_xent_backward(const Tensor& logits, const Tensor& labels, float scale, const float* loss_scale_dev,
                           Tensor& dlogits, float smoothing, const Exec& ex);

}  // namespace lockstep::ops
