// Gradient clipping by global norm (optim/grad_clip.h): updates through the
// DistributedOptimizer over a world of one against torch.nn.utils.clip_grad_norm_
// followed by torch.optim (PyTorch 1.13.1, fp32); the coefficient's edge
// cases; the sum of squares's fixed order; the device rule on the host.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "core/cpu.h"
#include "optim/distributed_optimizer.h"
#include "optim/grad_clip.h"
#include "optim/step_rule.h"

using namespace lockstep;

namespace {

struct Step {
  float norm;               // clip_grad_norm_'s return: the norm before clipping
  std::vector<float> p;     // p then q after the update
};

// Two parameters (so the norm spans parameters and the padding between them),
// three fixed gradients; the third is far above the limit, the second below it.
std::vector<Step> run(const OptimizerConfig& oc, float max_norm, int64_t* clipped = nullptr) {
  ParameterStore store;
  Parameter* p = store.declare("p", Shape{3});
  Parameter* q = store.declare("q", Shape{2});
  store.finalize();
  const std::vector<float> p0{0.5f, -1.f, 2.f}, q0{0.25f, 3.f};
  std::copy(p0.begin(), p0.end(), p->value.data<float>());
  std::copy(q0.begin(), q0.end(), q->value.data<float>());
  const std::vector<std::pair<std::vector<float>, std::vector<float>>> grads{
      {{0.1f, -0.2f, 0.3f}, {0.4f, -0.5f}}, {{-0.05f, 0.4f, 0.25f}, {0.01f, 0.02f}}, {{2.f, 1.f, -3.f}, {0.5f, 4.f}}};
  auto opt = make_optimizer(store, oc);
  SingleProcessCommunicator comm;
  DistributedOptions o;
  o.max_grad_norm = max_norm;
  DistributedOptimizer d(*opt, store, comm, o);
  std::vector<Step> out;
  for (const auto& [gp, gq] : grads) {
    std::copy(gp.begin(), gp.end(), p->grad.data<float>());
    std::copy(gq.begin(), gq.end(), q->grad.data<float>());
    d.step(0.1f);
    Step s{d.last_grad_norm(), p->value.to_vector()};
    for (float v : q->value.to_vector()) s.p.push_back(v);
    out.push_back(s);
  }
  if (clipped) *clipped = d.clipped_steps();
  return out;
}

void check(const std::vector<Step>& got, const std::vector<Step>& torch) {
  REQUIRE(got.size() == torch.size());
  for (size_t s = 0; s < torch.size(); ++s) {
    INFO("step " << s + 1);
    CHECK(got[s].norm == Approx(torch[s].norm).epsilon(1e-6));
    for (size_t i = 0; i < torch[s].p.size(); ++i) {
      INFO("element " << i);
      CHECK(got[s].p[i] == Approx(torch[s].p[i]).epsilon(3e-7).margin(3e-7));
    }
  }
}

}  // namespace

TEST_CASE("clipping matches torch.nn.utils.clip_grad_norm_ then torch.optim", "[optim][clip]") {
  OptimizerConfig sgd;
  sgd.momentum = 0.9f;
  sgd.weight_decay = 0.01f;
  int64_t clipped = -1;
  check(run(sgd, 0.5f, &clipped),
        {{0.741619885f, {0.492758006f, -0.985516012f, 1.97777402f, 0.222782046f, 3.03070998f}},
         {0.474868417f, {0.490747452f, -1.01149487f, 1.93079293f, 0.197063103f, 3.05331826f}},
         {5.5f, {0.470265388f, -1.04295528f, 1.91385186f, 0.169173539f, 3.03424883f}}});
  CHECK(clipped == 2);  // steps 1 and 3; step 2's norm is under the limit
  OptimizerConfig adam;
  adam.name = "adam";
  check(run(adam, 0.5f), {{0.741619885f, {0.400000036f, -0.900000036f, 1.89999998f, 0.150000006f, 3.0999999f}},
                          {0.474868417f, {0.390530586f, -0.949123979f, 1.8000052f, 0.0802814364f, 3.16247869f}},
                          {5.5f, {0.329457074f, -0.99970144f, 1.78240812f, 0.0165181458f, 3.14849424f}}});
}

TEST_CASE("clipping off leaves updates unchanged, a limit above every norm too", "[optim][clip]") {
  OptimizerConfig sgd;
  const std::vector<Step> off = run(sgd, 0.f), high = run(sgd, 100.f);
  int64_t clipped = -1;
  run(sgd, 100.f, &clipped);
  CHECK(clipped == 0);
  for (size_t s = 0; s < off.size(); ++s) CHECK(off[s].p == high[s].p);  // bitwise: the factor is exactly 1
}

TEST_CASE("clip coefficient: PyTorch's max / (norm + 1e-6) below 1, else 1, and 1 for inf/NaN norms", "[clip]") {
  CHECK(clip_coefficient(0.f, 1.f) == 1.f);
  CHECK(clip_coefficient(0.5f, 1.f) == 1.f);
  CHECK(clip_coefficient(1.f, 1.f) == 1.f / (1.f + kClipEpsilon));
  CHECK(clip_coefficient(4.f, 1.f) == 1.f / (4.f + kClipEpsilon));
  CHECK(clip_coefficient(std::numeric_limits<float>::infinity(), 1.f) == 1.f);
  CHECK(clip_coefficient(std::numeric_limits<float>::quiet_NaN(), 1.f) == 1.f);
}

TEST_CASE("sum of squares: one order whatever the thread count, close to an exact sum", "[clip]") {
  const int before = compute_threads();
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 3.f);
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{65536}, int64_t{65537}, int64_t{1000003}}) {
    std::vector<float> g(static_cast<size_t>(n));
    for (float& v : g) v = nd(rng);
    long double exact = 0;
    for (float v : g) exact += static_cast<long double>(v) * v;
    set_compute_threads(1);
    const double one = sum_of_squares_cpu(g.data(), n);
    INFO("n = " << n);
    for (int t : {2, 3}) {
      set_compute_threads(t);
      CHECK(sum_of_squares_cpu(g.data(), n) == one);  // bitwise
    }
    CHECK(one == Approx(static_cast<double>(exact)).epsilon(1e-12).margin(1e-300));
  }
  set_compute_threads(before);
}

TEST_CASE("device rule: clipping scales the gradient factor by the unscaled norm's coefficient", "[clip][loss_scale]") {
  StepConfig c;
  c.loss_scale.dynamic = false;  // a fixed scale of 1: clipping in fp32/bf16 on the GPU
  c.loss_scale.init_scale = 1.f;
  c.max_grad_norm = 0.25f;
  StepState s = initial_step_state(c);
  s.grad_sumsq = 16.0;  // summed gradient of norm 4; averaged over 2 ranks: 2
  step_rule(s, c, 0.1f, 0.5f, 0.f, 0.f);
  CHECK(s.skip == 0);
  CHECK(s.grad_norm == 2.f);
  CHECK(s.grad_factor == 0.5f * clip_coefficient(2.f, 0.25f));
  CHECK(s.clipped == 1);
  s.grad_sumsq = 0.04;  // norm 0.1 after averaging: under the limit
  step_rule(s, c, 0.1f, 0.5f, 0.f, 0.f);
  CHECK(s.grad_factor == 0.5f);
  CHECK(s.clipped == 1);

  // fp16: the norm is the unscaled gradient's; a non-finite sum is the inf/NaN check.
  StepConfig d;
  d.loss_scale.dynamic = true;
  d.loss_scale.init_scale = 1024.f;
  d.max_grad_norm = 1.f;
  StepState f = initial_step_state(d);
  f.grad_sumsq = 1024.0 * 1024.0 * 9.0;  // scaled gradient of norm 3 x 1024
  step_rule(f, d, 0.1f, 1.f, 0.f, 0.f);
  CHECK(f.skip == 0);
  CHECK(f.grad_norm == 3.f);
  CHECK(f.grad_factor == (1.f / 1024.f) * clip_coefficient(3.f, 1.f));
  f.grad_sumsq = std::numeric_limits<double>::infinity();
  step_rule(f, d, 0.1f, 1.f, 0.f, 0.f);
  CHECK(f.skip == 1);
  CHECK(f.scale == 512.f);
  CHECK(f.clipped == 1);  // a skipped step is not a clipped update
  // Without clipping the sum is not read: the flag alone decides.
  StepConfig e;
  e.loss_scale.dynamic = true;
  e.loss_scale.init_scale = 1024.f;
  StepState g = initial_step_state(e);
  g.grad_sumsq = std::numeric_limits<double>::infinity();
  step_rule(g, e, 0.1f, 1.f, 0.f, 0.f);
  CHECK(g.skip == 0);
  CHECK(g.grad_factor == 1.f / 1024.f);
}
