// Softmax cross-entropy over class logits (GPU), the twin of ops/loss/softmax_xent_cpu.h:
//   logits [B, C] of type dt (fp32, bf16 or fp16), labels [B] int32 in [0, C),
//   smoothing eps in [0, 1)
// The target of row i is q = (1 - eps) * onehot(label_i) + eps / C.
// Every function queues its work on `stream` and returns (asynchronous); every
// pointer is device memory. Deterministic: fixed-shape block reductions, no
// atomics, so the same inputs give bitwise the same results on every run.
// Labels are not checked on the host (they live on the device): a row whose
// label is outside [0, C) gets a NaN loss, counts as wrong and gets NaN
// gradients, instead of the CPU op's exception.
//
// Loss scaling: the backward functions multiply the gradient by
// scale * *scale_dev, where scale_dev is a nullable device pointer to one fp32
// value (the dynamic loss scale), read by the kernel when it runs (in stream
// order, so earlier work on the stream may set it; no host read). The product
// is computed once in fp32 and used where the CPU op uses scale, so a null
// scale_dev gives exactly the fp32 results of factor = scale, and a power of
// two in *scale_dev scales every gradient exactly (barring overflow, and
// underflow into subnormals).
//
// Data types: the first argument dt picks the logits' and dlogits' type,
// DType::F32, BF16 (__nv_bfloat16) or F16 (IEEE __half), arrays passed as
// void*; any other dtype throws (also for B = 0). Labels, the per-row scratch
// and the accumulators do not depend on it. In 16 bits (mixed precision): Each
// logit is widened exactly to fp32 and the math is the fp32 functions' (fp32
// max, fp64 sums and loss; fp32 gradients), so the loss and accuracy equal the
// fp32 functions' on the widened logits, and each gradient element is the
// fp32 function's value rounded to dt once (nearest even). For fp16 that
// rounding includes its range: gradients beyond 65504 in magnitude become
// +-inf (the overflow a dynamic loss scaler detects), those below 2^-14 are
// subnormal (fewer significant bits). Same label smoothing, same NaN rows for
// labels outside [0, C).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tensor/dtype.h"

namespace lockstep::ops {

// Adds this batch's summed loss -sum_j q_j log softmax(z)_j to *loss_sum and its
// number of rows whose (first) argmax equals the label to *correct, so a caller
// can accumulate over steps and read both only when it logs. Like the CPU op the
// log-sum-exp subtracts the row max in fp32 and sums exp() in fp64; each row's
// loss goes to row_loss[i] (fp64) and its 0/1 hit to row_correct[i], then one
// block adds them up in a fixed order.
//   logits [B, C] dt; row_loss [B] double, row_correct [B] int32 (caller's
//   scratch, overwritten); loss_sum [1] double, correct [1] int64 (accumulated into)
void softmax_xent_forward_cuda(DType dt, int64_t b, int64_t c, const void* logits, const int32_t* labels,
                               float smoothing, double* row_loss, int32_t* row_correct, double* loss_sum,
                               int64_t* correct, cudaStream_t stream);
// dlogits = (softmax(logits) - q) * factor, in fp32 as the CPU op with
// factor = scale * *scale_dev (fp32 product) when scale_dev is not null, else
// factor = scale (16-bit: each element that fp32 value rounded to dt once).
// scale_dev: nullable device pointer to one float (see above).
//   logits, dlogits [B, C] dt; labels [B]. dlogits may equal logits (in place).
void softmax_xent_backward_cuda(DType dt, int64_t b, int64_t c, const void* logits, const int32_t* labels,
                                float scale, const float* scale_dev, void* dlogits, float smoothing,
                                cudaStream_t stream);

}  // namespace lockstep::ops
