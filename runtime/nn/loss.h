// Softmax cross-entropy loss on a batch of logits.
//   logits [B, C] fp32    labels [B] int32
#pragma once

#include "tensor/tensor.h"

namespace lockstep {

struct LossStats {
  double loss_sum = 0;  // summed over the batch's samples
  int64_t correct = 0;  // argmax == label
  int64_t count = 0;    // samples
};

LossStats softmax_cross_entropy(const Tensor& logits, const Tensor& labels);
// dlogits = d(scale * sum_i loss_i)/dlogits. Use scale = 1/B for the batch mean.
void softmax_cross_entropy_backward(const Tensor& logits, const Tensor& labels, float scale, Tensor& dlogits);

}  // namespace lockstep
