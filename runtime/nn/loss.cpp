// Loss wrappers: shape checks, then the CPU kernel.
#include "nn/loss.h"

#include "ops/softmax_xent.h"

namespace lockstep {
namespace {
void check(const Tensor& logits, const Tensor& labels) {
  LS_CHECK(logits.rank() == 2 && labels.rank() == 1 && labels.size(0) == logits.size(0),
           "cross-entropy expects logits [B, C] and labels [B], got {} and {}", logits.shape().str(),
           labels.shape().str());
  LS_CHECK(logits.device().is_cpu(), "cross-entropy: tensors on {} are not supported by this build",
           logits.device().str());
}
}  // namespace

LossStats softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float label_smoothing) {
  check(logits, labels);
  const auto r = ops::softmax_xent_forward_cpu(logits.size(0), logits.size(1), logits.data<float>(),
                                               labels.data<int32_t>(), label_smoothing);
  return {r.loss_sum, r.correct, logits.size(0)};
}

void softmax_cross_entropy_backward(const Tensor& logits, const Tensor& labels, float scale, Tensor& dlogits,
                                    float label_smoothing) {
  check(logits, labels);
  LS_CHECK(dlogits.shape() == logits.shape(), "dlogits {} does not match logits {}", dlogits.shape().str(),
           logits.shape().str());
  ops::softmax_xent_backward_cpu(logits.size(0), logits.size(1), logits.data<float>(), labels.data<int32_t>(), scale,
                                 dlogits.data<float>(), label_smoothing);
}

}  // namespace lockstep
