// LossScaler: device state, the queued check + rule (ops/update/update.h),
// and the host's reads.
#include "optim/loss_scaler.h"

#include <cmath>

#include "core/error.h"
#include "ops/memory/memory.h"
#include "ops/update/update.h"

namespace lockstep {

LossScaler::LossScaler(cuda::Context& gpu, const LossScaleConfig& config) : gpu_(gpu), config_(config) {
  LS_CHECK_INPUT(config.init_scale > 0.f && std::isfinite(config.init_scale),
                 "--loss-scale {}: must be a positive finite number", config.init_scale);
  LS_CHECK_INPUT(config.growth_interval > 0, "--loss-scale-window {}: must be positive", config.growth_interval);
  LS_CHECK(config.growth_factor > 1.f && config.backoff_factor > 0.f && config.backoff_factor < 1.f,
           "loss scaling: growth {} must exceed 1 and backoff {} lie in (0, 1)", config.growth_factor,
           config.backoff_factor);
  LS_CHECK_INPUT(config.max_grad_norm >= 0.f && std::isfinite(config.max_grad_norm),
                 "--clip-grad-norm {}: must be a finite number >= 0", config.max_grad_norm);
  const std::shared_ptr<Allocator> alloc = ops::device_allocator(exec());
  if (config.max_grad_norm > 0.f)
    partials_ = Tensor::zeros(Shape{ops::loss_scale_partials() * static_cast<int64_t>(sizeof(double))}, DType::U8,
                              alloc);
  state_ = Tensor::zeros(Shape{static_cast<int64_t>(sizeof(LossScaleState))}, DType::U8, alloc);
  restore(initial_loss_scale_state(config));
}

void LossScaler::step(const float* grads, int64_t n, float lr, float base_factor, float beta1, float beta2) {
  ops::loss_scale_step(grads, n, partials_.defined() ? static_cast<double*>(partials_.raw_data()) : nullptr, state(),
                       config_, lr, lr_dev_, base_factor, beta1, beta2, exec());
}

LossScaleState LossScaler::read() const {
  LossScaleState s;
  ops::copy_to_host(&s, state(), sizeof s, state_.device(), exec());
  return s;
}

void LossScaler::restore(const LossScaleState& s) {
  ops::copy_from_host(state(), &s, sizeof s, state_.device(), exec());  // waits: `s` may be gone after we return
}

}  // namespace lockstep
