// Gradient clipping on the GPU (--clip-grad-norm): the device's fixed-order
// sum of squares (ops/update/step_rule_cuda.h) against the host's, and updates
// through the DistributedOptimizer and the loss scaler's rule against the
// CPU's DistributedOptimizer clipping the same gradients (world of one).
// fp32 with a fixed scale of 1, and fp16's dynamic scale (the GPU gets S
// times the CPU's gradients, S a power of two, so the unscaled norms agree).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "comm/communicator.h"
#include "gpu_test_util.h"
#include "optim/distributed_optimizer.h"
#include "optim/grad_clip.h"
#include "ops/update/step_rule_cuda.h"
#include "optim/device_step.h"
#include "registry.h"

using namespace lockstep;
using namespace lockstep::testing;

TEST_CASE("clipping on the GPU: the device sum of squares is the host's, the same every run", "[clip]") {
  GpuFixture f;
  for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{1000003}}) {
    CAPTURE(n);
    const std::vector<float> g = random_vector(n, 31, -3.f, 3.f);
    const Tensor t = Tensor::from_vector(Shape{n}, g).to(f.ctx.allocator());
    StepConfig c;
    c.loss_scale.dynamic = false;
    c.loss_scale.init_scale = 1.f;
    c.max_grad_norm = 1.f;
    DeviceStep scaler(f.ctx, c);
    Tensor partials = Tensor::zeros(Shape{kSumsqBlocks * 8}, DType::U8, f.ctx.allocator());
    auto* state = const_cast<StepState*>(scaler.state_dev());
    grad_sumsq_cuda(n, t.data<float>(), static_cast<double*>(partials.raw_data()), state, f.ctx.raw_stream());
    const double first = scaler.read().grad_sumsq;
    grad_sumsq_cuda(n, t.data<float>(), static_cast<double*>(partials.raw_data()), state, f.ctx.raw_stream());
    CHECK(scaler.read().grad_sumsq == first);  // bitwise: a fixed order
    CHECK(first == Approx(sum_of_squares_cpu(g.data(), n)).epsilon(1e-12));
  }
}

namespace {

// The mlp (784-256-10, about 200K values) twice, SGD with momentum and weight
// decay, three steps of given gradients on both sides.
void clip_parity(bool fp16) {
  CAPTURE(fp16);
  OptimizerConfig oc;
  oc.momentum = 0.9f;
  oc.weight_decay = 1e-4f;
  const float max_norm = 20.f;  // uniform [-0.5, 0.5] gradients over the mlp: norm about 100
  GpuFixture f;
  const models::ModelSpec spec{Shape{1, 28, 28}, 10};
  auto cpu = models::build_model("mlp", spec, 3), gpu = models::build_model("mlp", spec, 3);
  gpu->to(f.ctx.allocator());
  auto opt_cpu = make_optimizer(cpu->params(), oc), opt_gpu = make_optimizer(gpu->params(), oc);
  opt_gpu->use_gpu(f.ctx);
  StepConfig lc;
  lc.loss_scale.dynamic = fp16;
  lc.loss_scale.init_scale = fp16 ? 1024.f : 1.f;
  lc.max_grad_norm = max_norm;
  DeviceStep scaler(f.ctx, lc);
  opt_gpu->use_device_step(scaler.state_dev());
  SingleProcessCommunicator comm;
  DistributedOptions oh;
  oh.max_grad_norm = max_norm;
  DistributedOptimizer dcpu(*opt_cpu, cpu->params(), comm, oh);
  DistributedOptions og = oh;
  og.gpu = &f.ctx;
  og.device_step = &scaler;
  DistributedOptimizer dgpu(*opt_gpu, gpu->params(), comm, og);
  const int64_t n = cpu->params().padded_numel();
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    // Step 1 is small enough to pass unclipped.
    const float amp = step == 1 ? 0.01f : 0.5f;
    const std::vector<float> g = random_vector(n, 60 + static_cast<uint64_t>(step), -amp, amp);
    std::vector<float> scaled(g);
    for (float& v : scaled) v *= lc.loss_scale.init_scale;
    std::copy(g.begin(), g.end(), cpu->params().grads().data<float>());
    dcpu.begin_backward(true);
    dcpu.step(0.01f);
    dgpu.begin_backward(true);
    f.ctx.synchronize();
    copy_from_host(gpu->params().grads(), scaled.data());
    dgpu.step(0.01f);
    f.ctx.synchronize();
    LS_REQUIRE_PARITY(on_host(gpu->params().values()).to_vector(), cpu->params().values().to_vector(), 1e-6);
    LS_REQUIRE_PARITY(on_host(*opt_gpu->state()[0].second).to_vector(), opt_cpu->state()[0].second->to_vector(), 1e-6);
    const StepState st = scaler.read();
    CHECK(st.grad_norm == Approx(dcpu.last_grad_norm()).epsilon(1e-6));
    CHECK(st.clipped == dcpu.clipped_steps());
  }
  CHECK(dcpu.clipped_steps() == 2);
}

}  // namespace

TEST_CASE("clipping on the GPU through the DistributedOptimizer matches the CPU's", "[clip]") {
  clip_parity(false);  // fp32: a fixed scale of 1 carries the factor
  clip_parity(true);   // fp16: the norm of the unscaled gradient
}
