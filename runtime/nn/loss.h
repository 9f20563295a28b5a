// Softmax cross-entropy loss on a batch of logits, with optional label
// smoothing (target (1 - eps) * onehot + eps / C; eps in [0, 1), 0 = none).
//   logits [B, C] fp32    labels [B] int32
// or a sequence's: logits [B, T, V] and labels [B, T], each of the B*T
// positions a sample (counted, summed and scaled as one).
// Logits and labels on a GPU run on the context's stream, in the logits' type
// (ops/loss/softmax_xent.h).
#pragma once

#include "nn/module.h"
#include "ops/loss/softmax_xent.h"
#include "tensor/tensor.h"

namespace lockstep {

struct LossStats {
  double loss_sum = 0;  // summed over the batch's samples
  int64_t correct = 0;  // argmax == label
  int64_t count = 0;    // samples
};

// CPU tensors only: the sums of one batch.
LossStats softmax_cross_entropy(const Tensor& logits, const Tensor& labels, float label_smoothing = 0.f);
// dlogits = d(scale * sum_i loss_i)/dlogits. Use scale = 1/B for the batch mean.
// On a GPU (`gpu` given) queued on its stream; there `loss_scale_dev`, a device
// float (nullable), multiplies the gradient too, read by the kernel at run time:
// fp16 training's dynamic loss scale (optim/device_step.h), never read by the host.
void softmax_cross_entropy_backward(const Tensor& logits, const Tensor& labels, float scale, Tensor& dlogits,
                                    float label_smoothing = 0.f, cuda::Context* gpu = nullptr,
                                    const float* loss_scale_dev = nullptr);

// Running sums of loss, hits and samples over many batches, kept where the
// logits are: for GPU batches the sums stay in device memory (no host
// synchronisation per step) and read() is the one place that waits for them.
class LossAccumulator {
 public:
  void add(const Tensor& logits, const Tensor& labels, float label_smoothing = 0.f, cuda::Context* gpu = nullptr);
  // A replayed CUDA graph step ran add()'s kernels again (the device sums
  // grew); the host's sample count learns of its `rows` here.
  void count_replayed(int64_t rows) { host_.count += rows; }
  LossStats read() const;  // everything added since construction or reset()
  void reset();

 private:
  LossStats host_;                     // CPU batches' sums; the sample count of all batches
  ops::XentDeviceSums dev_;            // GPU batches' sums and per-row scratch
};

}  // namespace lockstep
