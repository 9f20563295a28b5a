// Dispatch for ops/loss/softmax_xent.h.
#include "ops/loss/softmax_xent.h"

#include "core/error.h"
#include "ops/memory/memory.h"

#ifdef LOCKSTEP_HAVE_CUDA
#include "cuda/context.h"
#include "ops/loss/softmax_xent_cuda.h"
#endif

namespace lockstep::ops {

XentResult softmax_xent_forward(const Tensor& logits, const Tensor& labels, float smoothing, XentDeviceSums* dev,
                                const Exec& ex) {
  const int64_t b = logits.size(0), c = logits.size(1);
  if (on_gpu(logits, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    LS_CHECK(dev != nullptr, "{}: GPU logits need device sums to add into", ex.who);
    const Device d = logits.device();
    if (!dev->loss_sum.defined() || dev->loss_sum.device() != d) {
      dev->loss_sum = Tensor::zeros(Shape{1}, DType::F64, allocator_for(d, ex));
      dev->correct = Tensor::zeros(Shape{1}, DType::I64, allocator_for(d, ex));
    }
    ensure_scratch(dev->row_loss, b, DType::F64, d, ex);
    ensure_scratch(dev->row_correct, b, DType::I32, d, ex);
    softmax_xent_forward_cuda(logits.dtype(), b, c, logits.raw_data(), labels.data<int32_t>(), smoothing,
                              dev->row_loss.data<double>(), dev->row_correct.data<int32_t>(),
                              dev->loss_sum.data<double>(), dev->correct.data<int64_t>(),
                              gpu_context(ex).raw_stream());
#endif
    return {};
  }
  return softmax_xent_forward_cpu(b, c, logits.data<float>(), labels.data<int32_t>(), smoothing);
}

void softmax_xent_backward(const Tensor& logits, const Tensor& labels, float scale, const float* loss_scale_dev,
                           Tensor& dlogits, float smoothing, const Exec& ex) {
  require_same(logits, dlogits, ex);
  const int64_t b = logits.size(0), c = logits.size(1);
  if (on_gpu(logits, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    softmax_xent_backward_cuda(logits.dtype(), b, c, logits.raw_data(), labels.data<int32_t>(), scale,
                               loss_scale_dev, dlogits.raw_data(), smoothing, gpu_context(ex).raw_stream());
#endif
    return;
  }
  LS_CHECK(loss_scale_dev == nullptr, "{}: a device loss scale with host tensors", ex.who);
  softmax_xent_backward_cpu(b, c, logits.data<float>(), labels.data<int32_t>(), scale, dlogits.data<float>(),
                            smoothing);
}

}  // namespace lockstep::ops
