// Loss wrappers: shape checks, then the CPU or GPU kernel.
#include "nn/loss.h"

#include "nn/device_util.h"
#include "ops/softmax_xent.h"
#ifdef LOCKSTEP_HAVE_CUDA
#include "cuda/context.h"
#include "ops/softmax_xent_cuda.h"
#endif

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
  const auto r = ops::softmax_xent_forward_cpu(logits.size(0), logits.size(1), logits.data<float>(),
                                               labels.data<int32_t>(), label_smoothing);
  return {r.loss_sum, r.correct, logits.size(0)};
}

void softmax_cross_entropy_backward(const Tensor& logits, const Tensor& labels, float scale, Tensor& dlogits,
                                    float label_smoothing, cuda::Context* gpu, const float* loss_scale_dev) {
  check(logits, labels);
  LS_CHECK(dlogits.shape() == logits.shape() && dlogits.device() == logits.device(),
           "dlogits {} on {} does not match logits {} on {}", dlogits.shape().str(), dlogits.device().str(),
           logits.shape().str(), logits.device().str());
#ifdef LOCKSTEP_HAVE_CUDA
  if (logits.device().is_cuda()) {
    const cudaStream_t st = gpu_context(gpu, "cross-entropy").raw_stream();
    LS_CHECK(dlogits.dtype() == logits.dtype(), "cross-entropy: {} logits need {} dlogits, got {}",
             dtype_name(logits.dtype()), dtype_name(logits.dtype()), dtype_name(dlogits.dtype()));
    if (is_16bit_float(logits.dtype()))  // mixed precision: 16-bit logits and dlogits
      ops::softmax_xent_backward_16_cuda(logits.dtype(), logits.size(0), logits.size(1), logits.raw_data(),
                                         labels.data<int32_t>(), scale, loss_scale_dev, dlogits.raw_data(),
                                         label_smoothing, st);
    else
      ops::softmax_xent_backward_cuda(logits.size(0), logits.size(1), logits.data<float>(), labels.data<int32_t>(),
                                      scale, loss_scale_dev, dlogits.data<float>(), label_smoothing, st);
    return;
  }
#endif
  LS_CHECK(logits.device().is_cpu(), "cross-entropy: tensors on {} are not supported by this build",
           logits.device().str());
  LS_CHECK(loss_scale_dev == nullptr, "cross-entropy: a device loss scale with host tensors");
  ops::softmax_xent_backward_cpu(logits.size(0), logits.size(1), logits.data<float>(), labels.data<int32_t>(), scale,
                                 dlogits.data<float>(), label_smoothing);
}

void LossAccumulator::add(const Tensor& logits, const Tensor& labels, float label_smoothing, cuda::Context* gpu) {
  check(logits, labels);
  if (logits.device().is_cpu()) {
    const LossStats s = softmax_cross_entropy(logits, labels, label_smoothing);
    host_.loss_sum += s.loss_sum;
    host_.correct += s.correct;
    host_.count += s.count;
    return;
  }
#ifdef LOCKSTEP_HAVE_CUDA
  const Device d = logits.device();
  const int64_t b = logits.size(0);
  if (!dev_loss_.defined() || dev_loss_.device() != d) {
    dev_loss_ = Tensor::zeros(Shape{1}, DType::F64, allocator_for(d, gpu, "LossAccumulator"));
    dev_correct_ = Tensor::zeros(Shape{1}, DType::I64, allocator_for(d, gpu, "LossAccumulator"));
  }
  ensure_scratch(row_loss_, b, DType::F64, d, gpu, "LossAccumulator");
  ensure_scratch(row_correct_, b, DType::I32, d, gpu, "LossAccumulator");
  const cudaStream_t st = gpu_context(gpu, "LossAccumulator").raw_stream();
  if (is_16bit_float(logits.dtype()))  // mixed precision: 16-bit logits, fp32/fp64 math
    ops::softmax_xent_forward_16_cuda(logits.dtype(), b, logits.size(1), logits.raw_data(), labels.data<int32_t>(),
                                      label_smoothing, row_loss_.data<double>(), row_correct_.data<int32_t>(),
                                      dev_loss_.data<double>(), dev_correct_.data<int64_t>(), st);
  else
    ops::softmax_xent_forward_cuda(b, logits.size(1), logits.data<float>(), labels.data<int32_t>(), label_smoothing,
                                   row_loss_.data<double>(), row_correct_.data<int32_t>(), dev_loss_.data<double>(),
                                   dev_correct_.data<int64_t>(), st);
  host_.count += b;
#else
  LS_THROW("LossAccumulator: tensors on {} need a build with CUDA support", logits.device().str());
#endif
}

LossStats LossAccumulator::read() const {
  LossStats s = host_;
  if (dev_loss_.defined()) {  // waits for the queued work (Tensor::to across devices synchronises)
    s.loss_sum += dev_loss_.to(cpu_allocator()).data<double>()[0];
    s.correct += dev_correct_.to(cpu_allocator()).data<int64_t>()[0];
  }
  return s;
}

void LossAccumulator::reset() {
  host_ = LossStats{};
  if (dev_loss_.defined()) {
    dev_loss_.zero();
    dev_correct_.zero();
  }
}

}  // namespace lockstep
