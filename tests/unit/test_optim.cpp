// Optimizers against steps computed by torch.optim (PyTorch 1.13.1, fp32) for
// p0 = [0.5, -1, 2] and three fixed gradients; LR schedules by hand; the
// large-batch recipe's settings (launcher/recipe.h) from trainer options.
#include <catch2/catch.hpp>

#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "options.h"
#include "recipe.h"

using namespace lockstep;

namespace {

using Traj = std::vector<std::vector<float>>;

Traj run(const OptimizerConfig& oc, float lr) {
  ParameterStore store;
  Parameter* p = store.declare("p", Shape{3});
  store.finalize();
  const std::vector<float> p0{0.5f, -1.f, 2.f};
  std::copy(p0.begin(), p0.end(), p->value.data<float>());
  const Traj grads{{0.1f, -0.2f, 0.3f}, {-0.05f, 0.4f, 0.25f}, {0.2f, 0.1f, -0.3f}};
  auto opt = make_optimizer(store, oc);
  Traj out;
  for (const auto& g : grads) {
    std::copy(g.begin(), g.end(), p->grad.data<float>());
    opt->step(lr);
    out.push_back(p->value.to_vector());
  }
  // Padding beyond the parameter stays exactly zero.
  for (int64_t i = 3; i < store.padded_numel(); ++i) REQUIRE(store.values().data<float>()[i] == 0.f);
  return out;
}

void check(const Traj& got, const Traj& torch) {
  for (size_t s = 0; s < torch.size(); ++s)
    for (size_t i = 0; i < 3; ++i) {
      INFO("step " << s + 1 << " element " << i);
      CHECK(got[s][i] == Approx(torch[s][i]).epsilon(2e-7).margin(2e-7));
    }
}

OptimizerConfig cfg(std::string name) {
  OptimizerConfig c;
  c.name = std::move(name);
  c.momentum = 0.f;
  return c;
}

}  // namespace

TEST_CASE("SGD matches torch.optim.SGD", "[optim]") {
  check(run(cfg("sgd"), 0.1f), {{0.49000001f, -0.980000019f, 1.97000003f},
                                {0.495000005f, -1.01999998f, 1.94500005f},
                                {0.474999994f, -1.02999997f, 1.97500002f}});
  auto m = cfg("sgd");
  m.momentum = 0.9f;
  m.weight_decay = 0.01f;
  check(run(m, 0.1f), {{0.489499986f, -0.978999972f, 1.96800005f},
                       {0.48456049f, -0.999120951f, 1.91223204f},
                       {0.45963037f, -1.02623069f, 1.89012861f}});
  auto n = cfg("sgd");
  n.momentum = 0.9f;
  n.nesterov = true;
  check(run(n, 0.1f), {{0.481000006f, -0.962000012f, 1.94299996f},
                       {0.4824f, -1.02180004f, 1.87119997f},
                       {0.441159993f, -1.0586201f, 1.88608003f}});
}

TEST_CASE("Adam and AdamW match torch.optim", "[optim]") {
  check(run(cfg("adam"), 0.01f), {{0.49000001f, -0.99000001f, 1.99000001f},
                                  {0.487336636f, -0.993661046f, 1.98008823f},
                                  {0.480755508f, -0.997817576f, 1.97790778f}});
  auto wd = cfg("adam");
  wd.weight_decay = 0.1f;
  check(run(wd, 0.01f), {{0.49000001f, -0.99000001f, 1.99000001f},
                         {0.483349204f, -0.990542948f, 1.98004234f},
                         {0.475223541f, -0.99097687f, 1.97339165f}});
  auto w = cfg("adamw");
  w.weight_decay = 0.1f;
  check(run(w, 0.01f), {{0.489500016f, -0.989000022f, 1.98800004f},
                        {0.486347139f, -0.991672099f, 1.97610033f},
                        {0.479279667f, -0.994836986f, 1.97194374f}});
}

TEST_CASE("SGD first step by hand", "[optim]") {
  // p = 0.5, g = 0.1, momentum 0.9, wd 0.01, lr 0.1: buf = g + wd*p = 0.105; p' = 0.5 - 0.0105
  auto m = cfg("sgd");
  m.momentum = 0.9f;
  m.weight_decay = 0.01f;
  CHECK(run(m, 0.1f)[0][0] == Approx(0.4895f));
}

TEST_CASE("decay can skip parameters declared without decay", "[optim]") {
  ParameterStore store;
  Parameter* w = store.declare("w", Shape{2});
  Parameter* b = store.declare("b", Shape{2}, /*decay=*/false);
  store.finalize();
  w->value.fill(1.f);
  b->value.fill(1.f);
  auto c = cfg("sgd");
  c.weight_decay = 0.5f;
  c.decay_all = false;
  auto opt = make_optimizer(store, c);
  opt->step(0.1f);  // zero gradients: only decay moves values
  CHECK(w->value.data<float>()[0] == Approx(0.95f));
  CHECK(b->value.data<float>()[0] == 1.f);
}

// --no-decay-bn-bias reaches the optimizer: a parameter declared decay=false
// (biases; batch norm's weight and bias) keeps its value under weight decay
// with the flag and decays without it. SGD and AdamW (decoupled decay) alike.
TEST_CASE("no-decay-bn-bias: decay=false parameters skip weight decay, and only with the flag", "[optim][recipe]") {
  for (const bool flag : {false, true})
    for (const char* name : {"sgd", "adamw"}) {
      INFO((flag ? "--no-decay-bn-bias, " : "default, ") << name);
      std::vector<std::string> args{"trainer", "--optimizer", name, "--weight-decay", "0.5", "--momentum", "0"};
      if (flag) args.push_back("--no-decay-bn-bias");
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      TrainConfig tc;
      REQUIRE(parse_train_options(static_cast<int>(argv.size()), argv.data(), tc) == ParseOutcome::Run);
      const OptimizerConfig oc = optimizer_config(tc);
      CHECK(oc.decay_all == !flag);
      ParameterStore store;
      Parameter* w = store.declare("w", Shape{2});
      Parameter* bn = store.declare("bn.weight", Shape{2}, /*decay=*/false);
      store.finalize();
      w->value.fill(1.f);
      bn->value.fill(1.f);
      auto opt = make_optimizer(store, oc);
      opt->step(0.1f);  // zero gradients: only decay moves values
      CHECK(w->value.data<float>()[0] == Approx(0.95f));  // both: p - lr * wd * p
      if (flag)
        CHECK(bn->value.data<float>()[0] == 1.f);
      else
        CHECK(bn->value.data<float>()[0] == Approx(0.95f));
    }
}

TEST_CASE("optimizer state is flat and named", "[optim]") {
  ParameterStore store;
  store.declare("p", Shape{5});
  store.finalize();
  auto sgd = make_optimizer(store, OptimizerConfig{});
  REQUIRE(sgd->state().size() == 1);
  CHECK(sgd->state()[0].first == "momentum");
  CHECK(sgd->state()[0].second->numel() == store.padded_numel());
  auto adam = make_optimizer(store, cfg("adam"));
  CHECK(adam->state().size() == 2);
  CHECK_THROWS_AS(make_optimizer(store, cfg("lamb")), InputError);
}

TEST_CASE("learning-rate schedules", "[optim]") {
  LrSchedule s;
  s.base_lr = 1.f;
  s.warmup_steps = 4;
  CHECK(s.lr(0) == Approx(0.25f));
  CHECK(s.lr(3) == Approx(1.f));
  CHECK(s.lr(100) == Approx(1.f));
  s.kind = "step";
  s.warmup_steps = 0;
  s.step_every = 10;
  s.gamma = 0.5f;
  CHECK(s.lr(9) == Approx(1.f));
  CHECK(s.lr(10) == Approx(0.5f));
  CHECK(s.lr(25) == Approx(0.25f));
  s.kind = "cosine";
  s.total_steps = 100;
  CHECK(s.lr(0) == Approx(1.f));
  CHECK(s.lr(50) == Approx(0.5f));
  CHECK(s.lr(100) == Approx(0.f).margin(1e-7));
  s.kind = "linear";
  CHECK_THROWS_AS(s.validate(), InputError);
}

// Goyal et al. 2017, section 2.2: "we start from a learning rate of eta and
// increment it by a constant amount at each iteration such that it reaches
// eta^ = k eta after 5 epochs". Here eta = 0.05, k = 8, 10 warmup steps.
TEST_CASE("gradual warmup from the unscaled LR, per step, as Goyal et al.", "[optim][recipe]") {
  LrSchedule s;
  s.base_lr = 0.4f;
  s.warmup_start_lr = 0.05f;
  s.warmup_steps = 10;
  s.validate();
  CHECK(s.lr(0) == Approx(0.05f));
  for (int64_t t = 1; t < 10; ++t) CHECK(s.lr(t) - s.lr(t - 1) == Approx(0.035f).epsilon(1e-4));  // (0.4 - 0.05) / 10
  CHECK(s.lr(9) == Approx(0.365f));
  CHECK(s.lr(10) == 0.4f);
  CHECK(s.lr(1000) == 0.4f);
  s.kind = "cosine";  // decay starts where warmup ends
  s.total_steps = 110;
  CHECK(s.lr(10) == Approx(0.4f));
  CHECK(s.lr(60) == Approx(0.2f));
  s.warmup_start_lr = 0.5f;  // above the target: not a warmup
  CHECK_THROWS_AS(s.validate(), InputError);
}

TEST_CASE("linear LR scaling: LR x global batch / base batch, warmup from --lr", "[optim][recipe]") {
  TrainConfig c;
  c.lr = 0.05f;
  c.warmup_epochs = 2.f;
  c.lr_schedule = LrScheduleKind::Step;
  c.lr_step_epochs = 30.f;
  // Without scaling: --lr at any batch, and the ramp of the plain schedule.
  for (const int64_t batch : {256, 2048}) {
    CHECK(effective_lr(c, batch) == 0.05f);
    const LrSchedule s = make_lr_schedule(c, batch, 50, 5000);
    CHECK(s.base_lr == 0.05f);
    CHECK(s.warmup_start_lr == 0.f);
    CHECK(s.lr(0) == Approx(0.05f / 100));
  }
  CHECK(describe_lr(c, 2048) == "0.05");
  c.lr_scaling = LrScaling::Linear;
  c.base_batch_size = 256;
  CHECK(effective_lr(c, 256) == 0.05f);
  CHECK(effective_lr(c, 2048) == Approx(0.4f));
  CHECK(effective_lr(c, 64) == Approx(0.0125f));
  CHECK(describe_lr(c, 2048) == "0.4 = 0.05 x 2048/256");
  const LrSchedule s = make_lr_schedule(c, 2048, 50, 5000);
  CHECK(s.base_lr == Approx(0.4f));
  CHECK(s.warmup_steps == 100);  // 2 epochs of 50 steps
  CHECK(s.step_every == 1500);
  CHECK(s.lr(0) == Approx(0.05f));
  CHECK(s.lr(50) == Approx(0.225f));
  CHECK(s.lr(100) == Approx(0.4f));
  CHECK(s.lr(1500) == Approx(0.04f));
  // k <= 1 (global batch at or below the base): nothing to ramp up from, the plain ramp.
  CHECK(make_lr_schedule(c, 256, 50, 5000).warmup_start_lr == 0.f);
  CHECK(make_lr_schedule(c, 64, 50, 5000).warmup_start_lr == 0.f);
}
