// Large-batch recipe: effective LR, optimizer settings, schedule.
#include "recipe.h"

#include "registry.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace lockstep {

float effective_lr(const TrainConfig& c, int64_t global_batch) {
  if (c.lr_scaling != LrScaling::Linear) return c.lr;
  return static_cast<float>(static_cast<double>(c.lr) * static_cast<double>(global_batch) /
                            static_cast<double>(c.base_batch_size));
}

std::string describe_lr(const TrainConfig& c, int64_t global_batch) {
  if (c.lr_scaling != LrScaling::Linear) return fmt::format("{}", c.lr);
  return fmt::format("{} = {} x {}/{}", effective_lr(c, global_batch), c.lr, global_batch, c.base_batch_size);
}

OptimizerConfig optimizer_config(const TrainConfig& c) {
  OptimizerConfig oc;
  oc.name = name(c.optimizer);
  oc.momentum = c.momentum;
  oc.nesterov = c.nesterov;
  oc.weight_decay = c.weight_decay;
  // GPT-2 (as llm.c and nanoGPT): decay on matrices and embeddings only, never
  // on the biases and LayerNorms the model declares without it.
  oc.decay_all = c.decay_bn_bias && !models::model_info(c.model).tokens;
  oc.beta1 = c.beta1;
  oc.beta2 = c.beta2;
  oc.eps = c.eps;
  return oc;
}

LrSchedule make_lr_schedule(const TrainConfig& c, int64_t global_batch, int64_t steps_per_epoch, int64_t total_steps) {
  LrSchedule s;
  s.kind = name(c.lr_schedule);
  s.base_lr = effective_lr(c, global_batch);
  s.warmup_steps = c.warmup_steps > 0
                       ? c.warmup_steps
                       : static_cast<int64_t>(std::llround(c.warmup_epochs * static_cast<double>(steps_per_epoch)));
  s.min_lr = c.min_lr;
  if (c.lr_scaling == LrScaling::Linear && s.warmup_steps > 0 && c.lr < s.base_lr) s.warmup_start_lr = c.lr;
  s.total_steps = total_steps;
  s.step_every = static_cast<int64_t>(std::llround(c.lr_step_epochs * static_cast<double>(steps_per_epoch)));
  if (c.lr_schedule == LrScheduleKind::Step) s.step_every = std::max<int64_t>(s.step_every, 1);
  s.gamma = c.lr_gamma;
  return s;
}

}  // namespace lockstep
