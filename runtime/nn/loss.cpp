// Loss wrappers: shape checks, then the device-neutral op (ops/loss/softmax_xent.h).
#include "nn/loss.h"

#include "ops/loss/softmax_xent.h"

namespace lockstep {
namespace {
// Logits [B, ..., C] and labels [B, ...] as the op's rows: [N, C] and [N].
struct Rows {
  Tensor logits, labels;
};
Rows rows(const Tensor& logits, const Tensor& labels) {
  bool match = logits.rank() >= 2 && labels.rank() == logits.rank() - 1;
  for (int d = 0; match && d < labels.rank(); ++d) match = labels.size(d) == logits.size(d);
  LS_CHECK(match, "cross-entropy expects logits [B, ..., C] and labels [B, ...], got {} and {}",
           logits.shape().str(), labels.shape().str());
  LS_CHECK(labels.device() == logits.device(), "cross-entropy: logits on {}, labels on {}", logits.device().str(),
           labels.device().str());
  const int64_t c = logits.size(logits.rank() - 1);
  return {logits.reshape(Shape{labels.numel(), c}), labels.reshape(Shape{labels.numel()})};
}
}  // namespace

LossStats softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float label_smoothing) {
  const Rows r = rows(logits, labels);
  LS_CHECK(logits.device().is_cpu(), "softmax_cross_entropy: host tensors only (use LossAccumulator on {})",
           logits.device().str());
  const ops::XentResult x = ops::softmax_xent_forward(r.logits, r.labels, label_smoothing, nullptr,
                                                      ops::Exec{nullptr, "softmax_cross_entropy"});
  return {x.loss_sum, x.correct, r.labels.numel()};
}

void softmax_cross_entropy_backward(const Tensor& logits, const Tensor& labels, float scale, Tensor& dlogits,
                                    float label_smoothing, cuda::Context* gpu, const float* loss_scale_dev) {
  const Rows r = rows(logits, labels);
  LS_CHECK(dlogits.shape() == logits.shape() && dlogits.device() == logits.device(),
           "dlogits {} on {} does not match logits {} on {}", dlogits.shape().str(), dlogits.device().str(),
           logits.shape().str(), logits.device().str());
  LS_CHECK(dlogits.dtype() == logits.dtype(), "cross-entropy: {} logits need {} dlogits, got {}",
           dtype_name(logits.dtype()), dtype_name(logits.dtype()), dtype_name(dlogits.dtype()));
  Tensor d = dlogits.reshape(r.logits.shape());
  ops::softmax_xent_backward(r.logits, r.labels, scale, loss_scale_dev, d, label_smoothing,
                             ops::Exec{gpu, "cross-entropy"});
}

void LossAccumulator::add(const Tensor& logits, const Tensor& labels, float label_smoothing, cuda::Context* gpu) {
  const Rows r = rows(logits, labels);
  const ops::XentResult x =
      ops::softmax_xent_forward(r.logits, r.labels, label_smoothing, &dev_, ops::Exec{gpu, "LossAccumulator"});
  host_.loss_sum += x.loss_sum;  // GPU logits: zero here, the sums are in dev_
  host_.correct += x.correct;
  host_.count += r.labels.numel();
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
