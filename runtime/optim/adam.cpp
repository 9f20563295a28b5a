// Adam/AdamW: the step's scalars, then one pass over the flat buffers where
// they are (ops/update/update.h).
#include "optim/adam.h"

#include <cmath>

#include "ops/update/update.h"

namespace lockstep {

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
  const ops::AdamScalars a{step_size, inv_sqrt_bc2, scale, b1, b2, eps, l2, shrink};
  ops::adam_update(n, p, g, m, v, a, decoupled_ ? wd : 0.f, loss_scale_, ops::Exec{gpu_, "Adam"});
}

}  // namespace lockstep
