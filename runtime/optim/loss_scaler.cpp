// LossScaler: device state, the queued check + rule, and the host's reads.
#include "optim/loss_scaler.h"

#include <cuda_runtime_api.h>

#include <cmath>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/context.h"
#include "optim/loss_scale_cuda.h"

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
  if (config.max_grad_norm > 0.f)
    partials_ = Tensor::zeros(Shape{kSumsqBlocks * static_cast<int64_t>(sizeof(double))}, DType::U8, gpu.allocator());
  state_ = Tensor::zeros(Shape{static_cast<int64_t>(sizeof(LossScaleState))}, DType::U8, gpu.allocator());
  restore(initial_loss_scale_state(config));
}

void LossScaler::step(const float* grads, int64_t n, float lr, float base_factor, float beta1, float beta2) {
  if (config_.max_grad_norm > 0.f)  // the rule reads the sum; a non-finite one is the inf/NaN flag
    grad_sumsq_cuda(n, grads, static_cast<double*>(partials_.raw_data()), state(), gpu_.raw_stream());
  else if (config_.dynamic)
    flag_nonfinite_cuda(n, grads, state(), gpu_.raw_stream());
  loss_scale_step_cuda(state(), config_, lr, lr_dev_, base_factor, beta1, beta2, gpu_.raw_stream());
}

LossScaleState LossScaler::read() const {
  LossScaleState s;
  LS_CUDA_CHECK(cudaMemcpyAsync(&s, state(), sizeof s, cudaMemcpyDeviceToHost, gpu_.raw_stream()));
  gpu_.synchronize();
  return s;
}

void LossScaler::restore(const LossScaleState& s) {
  LS_CUDA_CHECK(cudaMemcpyAsync(state(), &s, sizeof s, cudaMemcpyHostToDevice, gpu_.raw_stream()));
  gpu_.synchronize();  // `s` may be gone after we return
}

}  // namespace lockstep
