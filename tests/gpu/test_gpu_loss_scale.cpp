// fp16 training's dynamic loss scaling on the GPU (optim/device_step.h): the
// device inf/NaN check, the one-thread rule and the optimizer kernels reading
// its decision, against the CPU optimizer given the unscaled gradients.
//
// Gradients here are set directly (no model forward): the GPU gets S times
// the CPU's, S a power of two, so unscaling is exact and the updates differ
// only by the fused multiply-adds of the GPU kernels (ops/update/update_cuda.h):
// parameters and optimizer state within 1e-6 relative. A skipped step must
// leave parameters and state bitwise unchanged.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "gpu_test_util.h"
#include "optim/distributed_optimizer.h"
#include "ops/update/step_rule_cuda.h"
#include "optim/device_step.h"
#include "optim/optimizer.h"
#include "registry.h"

using namespace lockstep;
using namespace lockstep::testing;

namespace {

// The mlp's parameters twice (host and GPU) with an optimizer each; the GPU's
// updates follow a DeviceStep.
struct ScaledPair {
  GpuFixture& f;
  std::unique_ptr<Model> cpu, gpu;
  std::unique_ptr<Optimizer> opt_cpu, opt_gpu;
  DeviceStep scaler;

  ScaledPair(GpuFixture& fixture, const OptimizerConfig& oc, const StepConfig& lc)
      : f(fixture), scaler(fixture.ctx, lc) {
    const models::ModelSpec spec{Shape{1, 28, 28}, 10};
    cpu = models::build_model("mlp", spec, 3);
    gpu = models::build_model("mlp", spec, 3);
    gpu->to(f.ctx.allocator());
    opt_cpu = make_optimizer(cpu->params(), oc);
    opt_gpu = make_optimizer(gpu->params(), oc);
    opt_gpu->use_gpu(f.ctx);
    opt_gpu->use_device_step(scaler.state_dev());
  }
  int64_t n() const { return cpu->params().padded_numel(); }
  bool adam() const { return opt_cpu->name() != "sgd"; }

  // GPU gradients = scale * g (exact: scale is a power of two); `poison` >= 0
  // puts an inf (or NaN) at that index. Then the check, the rule and the update.
  void gpu_step(const std::vector<float>& g, float scale, float lr, int64_t poison = -1, bool nan = false) {
    std::vector<float> scaled(g);
    for (float& v : scaled) v *= scale;
    if (poison >= 0)
      scaled[static_cast<size_t>(poison)] =
          nan ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    gpu->params().grads().copy_from(Tensor::from_vector(Shape{n()}, scaled).to(f.ctx.allocator()));
    const OptimizerConfig& c = opt_gpu->config();
    scaler.step(gpu->params().grads().data<float>(), n(), lr, 1.f, adam() ? c.beta1 : 0.f, adam() ? c.beta2 : 0.f);
    opt_gpu->step(lr);
  }
  void cpu_step(const std::vector<float>& g, float lr) {
    cpu->params().grads().copy_from(Tensor::from_vector(Shape{n()}, g));
    opt_cpu->step(lr);
  }
  // Parameters followed by every optimizer state tensor, on the host.
  std::vector<float> snapshot(Model& m, Optimizer& o) {
    f.ctx.synchronize();
    std::vector<float> all = on_host(m.params().values()).to_vector();
    for (auto& [name, t] : o.state()) {
      const std::vector<float> v = on_host(*t).to_vector();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  }
};

void run_sequence(const OptimizerConfig& oc) {
  GpuFixture f;
  StepConfig lc;
  lc.loss_scale.dynamic = true;
  lc.loss_scale.init_scale = 1024.f;
  lc.loss_scale.growth_interval = 2;
  ScaledPair sp(f, oc, lc);
  const float lr = 0.01f;
  const auto g1 = random_vector(sp.n(), 21, -0.5f, 0.5f), g2 = random_vector(sp.n(), 22, -0.5f, 0.5f),
             g3 = random_vector(sp.n(), 23, -0.5f, 0.5f);

  sp.cpu_step(g1, lr);
  sp.gpu_step(g1, 1024.f, lr);
  LS_REQUIRE_PARITY(sp.snapshot(*sp.gpu, *sp.opt_gpu), sp.snapshot(*sp.cpu, *sp.opt_cpu), 1e-6);

  // An inf, then a NaN: both skipped, bitwise nothing changes, the scale halves each time.
  const std::vector<float> before = sp.snapshot(*sp.gpu, *sp.opt_gpu);
  sp.gpu_step(g2, 1024.f, lr, /*poison=*/sp.n() / 2);
  sp.gpu_step(g2, 512.f, lr, /*poison=*/0, /*nan=*/true);
  REQUIRE(sp.snapshot(*sp.gpu, *sp.opt_gpu) == before);
  StepState st = sp.scaler.read();
  CHECK(st.scale == 256.f);
  CHECK(st.skipped == 2);
  CHECK(st.applied == 1);

  // Two finite steps at the new scale: the CPU's second and third updates
  // (Adam: t = 2, 3 -- the skipped steps do not count); then the scale grows.
  sp.cpu_step(g2, lr);
  sp.gpu_step(g2, 256.f, lr);
  sp.cpu_step(g3, lr);
  sp.gpu_step(g3, 256.f, lr);
  LS_REQUIRE_PARITY(sp.snapshot(*sp.gpu, *sp.opt_gpu), sp.snapshot(*sp.cpu, *sp.opt_cpu), 1e-6);
  st = sp.scaler.read();
  CHECK(st.applied == 3);
  CHECK(st.skipped == 2);
  CHECK(st.scale == 512.f);  // two finite steps in a row (growth_interval 2)
  CHECK(st.good_steps == 0);
}

}  // namespace

TEST_CASE("fp16 loss scaling: skipped steps change nothing, updates match the CPU on unscaled gradients",
          "[loss_scale]") {
  OptimizerConfig oc;
  SECTION("SGD with momentum and weight decay") {
    oc.name = "sgd";
    oc.momentum = 0.9f;
    oc.weight_decay = 1e-4f;
    run_sequence(oc);
  }
  SECTION("Adam") {
    oc.name = "adam";
    run_sequence(oc);
  }
  SECTION("AdamW") {
    oc.name = "adamw";
    oc.weight_decay = 1e-2f;
    run_sequence(oc);
  }
}

// The trainer's path: DistributedOptimizer::step runs the check and the rule
// with the reducer's gradient factor and the optimizer's betas (world of one,
// staged through the host: the factor is 1/N = 1), then the update.
TEST_CASE("fp16 loss scaling through the DistributedOptimizer matches the CPU optimizer", "[loss_scale]") {
  OptimizerConfig oc;
  SECTION("Adam") { oc.name = "adam"; }
  SECTION("SGD with momentum") {
    oc.name = "sgd";
    oc.momentum = 0.9f;
  }
  GpuFixture f;
  StepConfig lc;
  lc.loss_scale.dynamic = true;
  lc.loss_scale.init_scale = 4096.f;
  ScaledPair sp(f, oc, lc);
  SingleProcessCommunicator comm;
  DistributedOptions o;
  o.gpu = &f.ctx;
  o.device_step = &sp.scaler;
  DistributedOptimizer dopt(*sp.opt_gpu, sp.gpu->params(), comm, o);
  const float lr = 0.01f;
  float scale = 4096.f;
  for (int step = 0; step < 4; ++step) {
    CAPTURE(step);
    const auto g = random_vector(sp.n(), 40 + static_cast<uint64_t>(step), -0.5f, 0.5f);
    std::vector<float> scaled(g);
    for (float& v : scaled) v *= scale;
    if (step == 1) scaled[7] = std::numeric_limits<float>::infinity();  // skipped; the scale halves
    dopt.begin_backward(true);
    f.ctx.synchronize();
    copy_from_host(sp.gpu->params().grads(), scaled.data());
    dopt.step(lr);
    if (step == 1)
      scale /= 2;
    else
      sp.cpu_step(g, lr);
    LS_REQUIRE_PARITY(sp.snapshot(*sp.gpu, *sp.opt_gpu), sp.snapshot(*sp.cpu, *sp.opt_cpu), 1e-6);
  }
  const StepState st = sp.scaler.read();
  CHECK(st.applied == 3);
  CHECK(st.skipped == 1);
  CHECK(st.scale == 2048.f);
}

TEST_CASE("fp16 loss scaling: the device check finds one inf or NaN among a million values", "[loss_scale]") {
  GpuFixture f;
  const int64_t n = 1 << 20;
  std::vector<float> g = random_vector(n, 5, -60000.f, 60000.f);
  DeviceStep scaler(f.ctx, StepConfig{LossScaleConfig{}});  // dynamic: the check runs
  StepState s = scaler.initial();
  auto found = [&](const std::vector<float>& v) {
    const Tensor t = Tensor::from_vector(Shape{n}, v).to(f.ctx.allocator());
    scaler.restore(s);
    flag_nonfinite_cuda(n, t.data<float>(), const_cast<StepState*>(scaler.state_dev()), f.ctx.raw_stream());
    return scaler.read().found_nonfinite;
  };
  CHECK(found(g) == 0);  // large but finite
  for (int64_t at : {int64_t{0}, n / 3, n - 1}) {
    CAPTURE(at);
    std::vector<float> bad = g;
    bad[static_cast<size_t>(at)] = -std::numeric_limits<float>::infinity();
    CHECK(found(bad) == 1);
    bad[static_cast<size_t>(at)] = std::numeric_limits<float>::quiet_NaN();
    CHECK(found(bad) == 1);
  }
}
