// DeviceStep: device state, the queued check + rule (ops/update/update.h),
// and the host's reads.
#include "optim/device_step.h"

#include <cmath>

#include "core/error.h"
#include "core/input_subject.h"
#include "ops/memory/memory.h"
#include "ops/update/update.h"

namespace lockstep {

DeviceStep::DeviceStep(cuda::Context& gpu, const StepConfig& config) : gpu_(gpu), config_(config) {
  const LossScaleConfig& ls = config.loss_scale;
  LS_CHECK_INPUT_ON(ls.init_scale > 0.f && std::isfinite(ls.init_scale), subject::kLossScale,
                    " {}: must be a positive finite number", ls.init_scale);
  LS_CHECK_INPUT_ON(ls.growth_interval > 0, subject::kLossScaleWindow, " {}: must be positive", ls.growth_interval);
  LS_CHECK(ls.growth_factor > 1.f && ls.backoff_factor > 0.f && ls.backoff_factor < 1.f,
           "loss scaling: growth {} must exceed 1 and backoff {} lie in (0, 1)", ls.growth_factor, ls.backoff_factor);
  LS_CHECK_INPUT_ON(config.max_grad_norm >= 0.f && std::isfinite(config.max_grad_norm), subject::kMaxGradNorm,
                    " {}: must be a finite number >= 0", config.max_grad_norm);
  const std::shared_ptr<Allocator> alloc = ops::device_allocator(exec());
  if (config.max_grad_norm > 0.f)
    partials_ = Tensor::zeros(Shape{ops::step_rule_partials() * static_cast<int64_t>(sizeof(double))}, DType::U8,
                              alloc);
  state_ = Tensor::zeros(Shape{static_cast<int64_t>(sizeof(StepState))}, DType::U8, alloc);
  restore(initial_step_state(config));
}

void DeviceStep::step(const float* grads, int64_t n, float lr, float base_factor, float beta1, float beta2) {
  ops::device_step_rule(grads, n, partials_.defined() ? static_cast<double*>(partials_.raw_data()) : nullptr, state(),
                        config_, lr, lr_dev_, base_factor, beta1, beta2, exec());
}

StepState DeviceStep::read() const {
  StepState s;
  ops::copy_to_host(&s, state(), sizeof s, state_.device(), exec());
  return s;
}

void DeviceStep::restore(const StepState& s) {
  ops::copy_from_host(state(), &s, sizeof s, state_.device(), exec());  // waits: `s` may be gone after we return
}

}  // namespace lockstep
