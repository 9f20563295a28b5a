// The dynamic loss-scale rule (optim/step_rule.h) on the host: the same
// function one GPU thread runs each fp16 step. GradScaler's semantics: skip
// and halve on inf/NaN, double after `growth_interval` finite steps in a row,
// never grow past fp32's range; Adam's bias corrections follow the applied
// updates only. Also the checkpoint round trip of the scale.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "checkpoint/checkpoint.h"
#include "optim/step_rule.h"
#include "registry.h"
#include "temp_dir.h"

using namespace lockstep;

namespace {

StepConfig small_window() {
  StepConfig c;
  c.loss_scale.dynamic = true;
  c.loss_scale.init_scale = 1024.f;
  c.loss_scale.growth_interval = 3;
  return c;
}

// One step with this step's inf/NaN verdict.
void step(StepState& s, const StepConfig& c, bool nonfinite, float lr = 0.1f, float b1 = 0.9f,
          float b2 = 0.999f) {
  s.found_nonfinite = nonfinite ? 1 : 0;
  step_rule(s, c, lr, 0.5f, b1, b2);
}

}  // namespace

TEST_CASE("loss scale: skip and halve on inf/NaN, grow after a window of finite steps", "[loss_scale]") {
  const StepConfig c = small_window();
  StepState s = initial_step_state(c);
  REQUIRE(s.scale == 1024.f);
  REQUIRE(s.applied == 0);

  step(s, c, false);  // finite: applied, gradients / 1024 times the base factor
  CHECK(s.skip == 0);
  CHECK(s.grad_factor == 0.5f / 1024.f);
  CHECK(s.applied == 1);
  CHECK(s.good_steps == 1);
  CHECK(s.scale == 1024.f);
  CHECK(s.found_nonfinite == 0);

  step(s, c, true);  // inf/NaN: skipped; this step's factor used the old scale, the next sees half
  CHECK(s.skip == 1);
  CHECK(s.grad_factor == 0.5f / 1024.f);
  CHECK(s.scale == 512.f);
  CHECK(s.applied == 1);
  CHECK(s.skipped == 1);
  CHECK(s.good_steps == 0);
  CHECK(s.found_nonfinite == 0);

  step(s, c, false);
  step(s, c, false);
  CHECK(s.scale == 512.f);
  CHECK(s.good_steps == 2);
  step(s, c, false);  // the third finite step in a row: the scale doubles, the count restarts
  CHECK(s.skip == 0);
  CHECK(s.grad_factor == 0.5f / 512.f);
  CHECK(s.scale == 1024.f);
  CHECK(s.good_steps == 0);
  CHECK(s.applied == 4);
  CHECK(s.skipped == 1);

  step(s, c, true);
  step(s, c, true);  // consecutive overflows keep halving
  CHECK(s.scale == 256.f);
  CHECK(s.skipped == 3);
  CHECK(s.applied == 4);
}

TEST_CASE("loss scale: Adam's bias corrections count applied updates only", "[loss_scale]") {
  const StepConfig c = small_window();
  StepState s = initial_step_state(c);
  const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f;
  // As Adam::update computes them for t = 1, 2.
  auto expect = [&](double t) {
    CHECK(s.step_size == static_cast<float>(lr / (1.0 - std::pow(static_cast<double>(b1), t))));
    CHECK(s.inv_sqrt_bc2 == static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(static_cast<double>(b2), t))));
  };
  step(s, c, true, lr, b1, b2);  // the first step overflows: nothing applied, t stays 0
  CHECK(s.skip == 1);
  CHECK(s.applied == 0);
  step(s, c, false, lr, b1, b2);
  expect(1);
  step(s, c, true, lr, b1, b2);
  step(s, c, false, lr, b1, b2);
  expect(2);
  // SGD passes betas 0: the scalars are lr and 1 (unused by SGD).
  step(s, c, false, lr, 0.f, 0.f);
  CHECK(s.step_size == lr);
  CHECK(s.inv_sqrt_bc2 == 1.f);
}

TEST_CASE("loss scale: growth stops short of fp32 overflow", "[loss_scale]") {
  StepConfig c;
  c.loss_scale.dynamic = true;
  c.loss_scale.init_scale = std::numeric_limits<float>::max() / 1.5f;
  c.loss_scale.growth_interval = 1;
  StepState s = initial_step_state(c);
  step(s, c, false);
  CHECK(s.scale == c.loss_scale.init_scale);  // doubling would be inf: kept
  CHECK(std::isfinite(s.scale));
  CHECK(s.good_steps == 0);
}

TEST_CASE("a fixed scale of 1 only carries the step's scalars (captured CUDA graphs)", "[loss_scale]") {
  StepConfig c;
  c.loss_scale.dynamic = false;
  c.loss_scale.init_scale = 1.f;
  c.loss_scale.growth_interval = 2;
  StepState s = initial_step_state(c);
  for (int i = 1; i <= 5; ++i) {
    const float lr = 0.1f / static_cast<float>(i);
    step(s, c, false, lr);
    CHECK(s.skip == 0);
    CHECK(s.lr == lr);
    CHECK(s.grad_factor == 0.5f);  // the base factor itself: exactly the eager update's
    CHECK(s.scale == 1.f);         // never grows
    CHECK(s.applied == i);
  }
}

TEST_CASE("loss scale: a scale so small that 1/S overflows skips the step", "[loss_scale]") {
  StepConfig c;
  c.loss_scale.dynamic = true;
  c.loss_scale.init_scale = 1e-39f;  // fp32 subnormal: 0.5 / S is inf
  StepState s = initial_step_state(c);
  step(s, c, false);
  CHECK(s.skip == 1);
  CHECK(s.applied == 0);
  CHECK(s.skipped == 1);
}

TEST_CASE("loss scale: a checkpoint keeps the scale, its finite-step run and the skipped steps", "[loss_scale]") {
  testing::TempDir dir;
  const models::ModelSpec spec{Shape{1, 28, 28}, 10};
  auto model = models::build_model("mlp", spec, 1);
  OptimizerConfig oc;
  auto opt = make_optimizer(model->params(), oc);
  CheckpointInfo info;
  info.progress = {7, 0, 7};
  info.global_batch = 32;
  info.config_json = "{}";
  info.loss_scale = 1.5f * 1024.f;
  info.loss_scale_good_steps = 11;
  info.skipped_steps = 3;
  info.optimizer_steps = 4;  // the applied updates: 7 steps, 3 skipped
  save_checkpoint(dir.path().string(), *model, *opt, info, 2);
  info.progress = {8, 0, 8};
  info.loss_scale = 0.f;  // an fp32 run's checkpoint: no loss-scale metadata
  info.optimizer_steps = -1;  // the optimizer's own count
  opt->set_steps(8);
  save_checkpoint(dir.path().string(), *model, *opt, info, 2);

  auto loaded = load_latest_checkpoint(dir.path().string(), *model, *opt, [](const std::string&) {});
  REQUIRE(loaded);
  CHECK(loaded->info.progress.step == 8);
  CHECK(loaded->info.loss_scale == 0.f);
  CHECK(opt->steps() == 8);
  std::filesystem::remove(loaded->path);
  loaded = load_latest_checkpoint(dir.path().string(), *model, *opt, [](const std::string&) {});
  REQUIRE(loaded);
  CHECK(loaded->info.progress.step == 7);
  CHECK(loaded->info.loss_scale == 1536.f);
  CHECK(loaded->info.loss_scale_good_steps == 11);
  CHECK(loaded->info.skipped_steps == 3);
  CHECK(opt->steps() == 4);
}
