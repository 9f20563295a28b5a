// Softmax cross-entropy over class logits (CPU), with optional label smoothing.
//   logits [B, C], labels [B] (int32 in [0, C)), smoothing eps in [0, 1)
// The target of row i is q = (1 - eps) * onehot(label_i) + eps / C.
// forward: returns the summed loss -sum_j q_j log softmax(z)_j over the rows
//          and counts correct argmaxes.
// backward: dlogits = (softmax(logits) - q) * scale.
// Rows run in parallel over the compute threads; results do not depend on their number.
#pragma once

#include <cstdint>

namespace lockstep::ops {

struct XentResult {
  double loss_sum = 0;
  int64_t correct = 0;
};

XentResult softmax_xent_forward_cpu(int64_t b, int64_t c, const float* logits, const int32_t* labels,
                                    float smoothing = 0.f);
void softmax_xent_backward_cpu(int64_t b, int64_t c, const float* logits, const int32_t* labels, float scale,
                               float* dlogits, float smoothing = 0.f);

}  // namespace lockstep::ops
