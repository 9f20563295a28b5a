// SGD update, one pass over the flat buffers.
#include "optim/sgd.h"

#include "core/input_subject.h"
#include "ops/update/update.h"

namespace lockstep {

Sgd::Sgd(ParameterStore& params, const OptimizerConfig& config) : Optimizer(params, config) {
  LS_CHECK_INPUT_ON(config.momentum >= 0.f && config.momentum < 1.f, subject::kMomentum, " {} must be in [0, 1)",
                    config.momentum);
  LS_CHECK_INPUT_ON(config.momentum > 0.f || !config.nesterov, subject::kMomentum,
                    " {}: Nesterov momentum needs it above 0", config.momentum);
}

std::string Sgd::describe() const {
  return fmt::format("SGD(momentum={}, nesterov={}, weight_decay={})", config_.momentum, config_.nesterov,
                     config_.weight_decay);
}

std::vector<std::pair<std::string, Tensor*>> Sgd::state_slots() {
  if (config_.momentum == 0.f) return {};
  return {{"momentum", &momentum_}};
}

void Sgd::update(int64_t begin, int64_t end, int64_t state_begin, float lr, float scale, bool decay) {
  const int64_t n = end - begin;
  float* p = params_.values().data<float>() + begin;
  const float* g = params_.grads().data<float>() + begin;
  const float wd = decay ? config_.weight_decay : 0.f, m = config_.momentum;
  ops::sgd_update(n, p, g, m == 0.f ? nullptr : momentum_.data<float>() + state_begin, lr, scale, wd, m,
                  config_.nesterov, loss_scale_, ops::Exec{gpu_, "SGD"});
}

}  // namespace lockstep
