// Loss wrappers: shape checks, then the device-neutral op (ops/loss/softmax_xent.h).
#include "nn/loss.h"

#include "ops/loss/softmax_xent.h"

namespace lockstep {
namespace {
void check(const Tensor& logits, const Tensor& labels) {
  LS_CHECK(logits.rank() == 2 && labels.rank() == 1 && labels.size(0) == logits.size(0),
           "cross-entropy expects logits [B, C] and labels [B], got {} and {}", logits.shape().str(),
           labels.shape().str());
  LS_CHECK(labels.device() == logits.device(), "cross-entropy: logits on {}, labels on {}", logits.device().str(),
           labels.device().str());
}
}  // namespace

LossStats softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float label_smoothing) {
  check(logits, labels);
  LS_CHECK(logits.device().is_cpu(), "softmax_cross_entropy: host tensors only (use LossAccumulator on {})",
           logits.device().str());
  const ops::XentResult r =
      ops::softmax_xent_forward(logits, labels, label_smoothing, nullptr, ops::Exec{nullptr, "softmax_cross_entropy"});
  return {r.loss_sum, r.correct, logits.size(0)};
}

void softmax_cross_entropy_backward(const Tensor& logits, const Tensor& labels, float scale, Tensor& dlogits,
                                    float label_smoothing, cuda::Context* gpu, const float* loss_scale_dev) {
  check(logits, labels);
  LS_CHECK(dlogits.shape() == logits.shape() && dlogits.device() == logits.device(),
           "dlogits {} on {} does not match logits {} on {}", dlogits.shape().str(), dlogits.device().str(),
           logits.shape().str(), logits.device().str());
  LS_CHECK(dlogits.dtype() == logits.dtype(), "cross-entropy: {} logits need {} dlogits, got {}",
           dtype_name(logits.dtype()), dtype_name(logits.dtype()), dtype_name(dlogits.dtype()));
  ops::softmax_xent_backward(logits, labels, scale, loss_scale_dev, dlogits, label_smoothing,
                             ops::Exec{gpu, "cross-entropy"});
}

void LossAccumulator::add(const Tensor& logits, const Tensor& labels, float label_smoothing, cuda::Context* gpu) {
  check(logits, labels);
  const ops::XentResult r =
      ops::softmax_xent_forward(logits, labels, label_smoothing, &dev_, ops::Exec{gpu, "LossAccumulator"});
  host_.loss_sum += r.loss_sum;  // GPU logits: zero here, the sums are in dev_
  host_.correct += r.correct;
  host_.count += logits.size(0);
}

LossStats LossAccumulator::read() const {
  LossStats s = host_;
  if (dev_.loss_sum.defined()) {  // waits for the queued work (Tensor::to across devices synchronises)
    s.loss_sum += dev_.loss_sum.to(cpu_allocator()).data<double>()[0];
    s.correct += dev_.correct.to(cpu_allocator()).data<int64_t>()[0];
  }
  return s;
}

void LossAccumulator::reset() {
  host_ = LossStats{};
  if (dev_.loss_sum.defined()) {
    dev_.loss_sum.zero();
    dev_.correct.zero();
  }
}

}  // namespace lockstep
