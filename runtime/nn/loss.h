// Softmax cross-entropy loss on a batch of logits, with optional label
// smoothing (target (1 - eps) * onehot + eps / C; eps in [0, 1), 0 = none).
//   logits [B, C] fp32    labels [B] int32
#pragma once

#include "tensor/tensor.h"

namespace lockstep {

struct LossStats {
  double loss_sum = 0;  // summed over the batch's samples
  int64_t correct = 0;  // argmax == label
  int64_t count = 0;    // samples
};

LossStats softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float label_smoothing = 0.f);
// dlogits = d(scale * sum_i loss_i)/dlogits. Use scale = 1/B for the batch mean.
void softmax_cross_entropy_backward(const Tensor& logits, const Tensor& labels, float scale, Tensor& dlogits,
                                    float label_smoothing = 0.f);

}  // namespace lockstep
