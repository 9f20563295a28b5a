// Adam/AdamW update, one pass over the flat buffers.
#include "optim/adam.h"

#include <cmath>

#include "ops/simd.h"

#ifdef LOCKSTEP_HAVE_CUDA
#include "cuda/context.h"
#include "optim/update_cuda.h"
#endif

namespace lockstep {
namespace {

// The host update of n elements. Vectorised: this file is compiled with
// -fno-math-errno (sqrt of a second moment, never negative, has no error to
// report), without which gcc keeps every sqrt scalar to set errno; and an
// AVX2 clone where the CPU has it.
LS_SIMD_CLONES void adam_update_cpu(int64_t n, float* p, const float* g, float* m, float* v, float step_size,
                                    float inv_sqrt_bc2, float scale, float b1, float b2, float eps, float l2,
                                    float shrink) {
  adam_update_cpu(n, p, g, m, v, step_size, inv_sqrt_bc2, scale, b1, b2, eps, l2, shrink);
}

}  // namespace

Adam::Adam(ParameterStore& params, const OptimizerConfig& config)
    : Optimizer(params, config), decoupled_(config.name == "adamw") {
  LS_CHECK_INPUT(config.beta1 >= 0.f && config.beta1 < 1.f && config.beta2 >= 0.f && config.beta2 < 1.f,
                 "Adam betas ({}, {}) must be in [0, 1)", config.beta1, config.beta2);
  LS_CHECK_INPUT(config.eps > 0.f, "Adam eps {} must be positive", config.eps);
}

std::string Adam::describe() const {
  return fmt::format("{}(betas=({}, {}), eps={}, weight_decay={})", decoupled_ ? "AdamW" : "Adam", config_.beta1,
                     config_.beta2, config_.eps, config_.weight_decay);
}

std::vector<std::pair<std::string, Tensor*>> Adam::state_slots() { return {{"exp_avg", &m_}, {"exp_avg_sq", &v_}}; }

void Adam::update(int64_t begin, int64_t end, int64_t state_begin, float lr, float scale, bool decay) {
  const int64_t n = end - begin;
  float* p = params_.values().data<float>() + begin;
  const float* g = params_.grads().data<float>() + begin;
  float* m = m_.data<float>() + state_begin;
  float* v = v_.data<float>() + state_begin;
  const double t = static_cast<double>(steps_ + 1);
  const float b1 = config_.beta1, b2 = config_.beta2, eps = config_.eps;
  const float step_size = static_cast<float>(lr / (1.0 - std::pow(static_cast<double>(b1), t)));
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(static_cast<double>(b2), t)));
  const float wd = decay ? config_.weight_decay : 0.f;
  const float l2 = decoupled_ ? 0.f : wd;
  const float shrink = decoupled_ ? 1.f - lr * wd : 1.f;
#ifdef LOCKSTEP_HAVE_CUDA
  if (gpu_) {
    adam_update_cuda(n, p, g, m, v, step_size, inv_sqrt_bc2, scale, b1, b2,
                     eps, l2, shrink, decoupled_ ? wd : 0.f, loss_scale_, gpu_->raw_stream());
    return;
  }
#endif
#pragma omp parallel for simd schedule(static) if (n > (1 << 18))
  for (int64_t i = 0; i < n; ++i) {
    const float pi = p[i] * shrink;
    const float gi = scale * g[i] + l2 * pi;
    const float mi = b1 * m[i] + (1.f - b1) * gi;
    const float vi = b2 * v[i] + (1.f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
  }
}

}  // namespace lockstep
