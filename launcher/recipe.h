// The large-batch recipe of Goyal et al., "Accurate, Large Minibatch SGD"
// (2017), from TrainConfig to the optimizer and schedule the trainer uses:
// the learning rate scaled linearly with the global batch (--lr-scaling
// linear, --base-batch-size), gradual warmup from the unscaled rate
// (--warmup-epochs), no weight decay on biases and batch-norm parameters
// (--no-decay-bn-bias). Label smoothing is applied by the loss (nn/loss.h).
#pragma once

#include <cstdint>
#include <string>

#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "options.h"

namespace lockstep {

// --lr, or with --lr-scaling linear: --lr x global_batch / --base-batch-size.
float effective_lr(const TrainConfig& c, int64_t global_batch);
// "0.05", or with linear scaling "0.4 = 0.05 x 2048/256".
std::string describe_lr(const TrainConfig& c, int64_t global_batch);
// --optimizer and its settings; --no-decay-bn-bias skips weight decay for
// parameters declared with decay=false (biases, batch-norm weight and bias).
OptimizerConfig optimizer_config(const TrainConfig& c);
// The schedule of a run of `total_steps` steps, `steps_per_epoch` per epoch, at
// the effective LR. With linear scaling above --lr, warmup ramps per step from
// --lr (Goyal's eta) to the scaled LR (k x eta), as the paper does; otherwise
// from lr / warmup steps, as without the recipe.
LrSchedule make_lr_schedule(const TrainConfig& c, int64_t global_batch, int64_t steps_per_epoch, int64_t total_steps);

}  // namespace lockstep
