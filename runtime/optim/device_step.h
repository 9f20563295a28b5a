// DeviceStep: the owner of a GPU training step's device-side scalars on one
// rank (the state, the rule and its semantics: optim/step_rule.h): the
// learning rate, gradient factor, skip decision and Adam's scalars the
// optimizer kernels read, and, as configured, fp16's dynamic loss scale and
// gradient clipping. The trainer makes one when a step needs any of them on
// the device (fp16, clipping, a captured CUDA graph). Per step:
//   backward seeds the loss gradient with *scale_dev()        (nn/loss.h)
//   after the gradient average: step(grads, n, lr, base)      (check + rule)
//   the optimizer kernels read state_dev(): skip, grad factor, Adam's scalars
// All of it queued on the context's stream; read() is the only host wait
// (the trainer calls it when it logs, and before a checkpoint).
// Made with a device context (GPU runs only).
#pragma once

#include <cstdint>

#include "ops/exec.h"
#include "optim/step_rule.h"
#include "tensor/tensor.h"

namespace lockstep {

namespace cuda {
class Context;
}

class DeviceStep {
 public:
  DeviceStep(cuda::Context& gpu, const StepConfig& config);

  const float* scale_dev() const { return &state()->scale; }
  const StepState* state_dev() const { return state(); }
  // Queues the inf/NaN check of grads [n] (with clipping: the sum of their
  // squares, which is that check too) and the step rule with this step's
  // learning rate, base gradient factor (1/N when averaging) and Adam betas
  // (0 for SGD).
  void step(const float* grads, int64_t n, float lr, float base_factor, float beta1, float beta2);
  // Captured CUDA graphs: the learning rate is read from this device float at
  // run time instead of step()'s argument (which a graph would freeze).
  void read_lr_from(const float* lr_dev) { lr_dev_ = lr_dev; }
  // The state after the work queued so far (waits for the stream).
  StepState read() const;
  // Replaces the state (a resumed or broadcast one); waits for the copy.
  void restore(const StepState& s);
  const StepConfig& config() const { return config_; }
  StepState initial() const { return initial_step_state(config_); }

 private:
  StepState* state() const { return static_cast<StepState*>(state_.raw_data()); }
  ops::Exec exec() const { return ops::Exec{&gpu_, "device step"}; }

  cuda::Context& gpu_;
  StepConfig config_;
  const float* lr_dev_ = nullptr;
  Tensor state_;     // sizeof(StepState) bytes of device memory
  Tensor partials_;  // clipping: kSumsqBlocks doubles of device scratch
};

}  // namespace lockstep
