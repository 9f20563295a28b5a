// Softmax cross-entropy over class logits (CPU).
//   logits [B, C], labels [B] (int32 in [0, C))
// forward: returns the summed loss over the rows and counts correct argmaxes.
// backward: dlogits = (softmax(logits) - onehot(label)) * scale.
#pragma once

#include <cstdint>

namespace lockstep::ops {

struct XentResult {
  double loss_sum = 0;
  int64_t correct = 0;
};

XentResult softmax_xent_forward_cpu(int64_t b, int64_t c, const float* logits, const int32_t* labels);
void softmax_xent_backward_cpu(int64_t b, int64_t c, const float* logits, const int32_t* labels, float scale,
                               float* dlogits);

}  // namespace lockstep::ops
