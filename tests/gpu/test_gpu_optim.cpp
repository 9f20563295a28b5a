// GPU optimizer updates (ops/update/update_cuda.h) against the CPU optimizers: the
// same ParameterStore layout and gradients stepped by Sgd/Adam on the host and
// by sgd_update_cuda/adam_update_cuda on the device, range by range (decay
// on/off ranges too), for several steps with a changing learning rate and a
// gradient scale of 1/2 (as the distributed optimizer's 1/N).
//
// Tolerance: 1e-6 (LS_REQUIRE_PARITY: relative above 1, absolute below) on the
// parameters and on every state buffer after every step. The GPU evaluates the
// CPU's fp32 formulas, but nvcc contracts each a*b + c into one FMA (one
// rounding instead of two) while the host build (x86-64 baseline, no FMA)
// rounds twice, so values differ in the last bits and the differences carry
// into later steps. A host simulation of these cases with explicit fmaf stays
// below 3.2e-7 over 5 steps (momentum buffers are the worst: m*buf + g cancels).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "cuda/check.h"
#include "gpu_test_util.h"
#include "optim/optimizer.h"
#include "ops/update/update_cuda.h"

using namespace lockstep;
using namespace lockstep::testing;

namespace {

constexpr float kGradScale = 0.5f;
constexpr int kSteps = 5;

struct Range {
  int64_t begin, end;
  bool decay;
};

// The ranges Optimizer's constructor makes: runs of the flat buffer, in offset
// order, with one decay setting each.
std::vector<Range> ranges_of(const ParameterStore& store, bool decay_all) {
  std::vector<const Parameter*> by_offset;
  for (const auto& p : store.params()) by_offset.push_back(&p);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  std::vector<Range> ranges;
  for (size_t i = 0; i < by_offset.size(); ++i) {
    const bool decay = decay_all || by_offset[i]->decay;
    const int64_t end = i + 1 < by_offset.size() ? by_offset[i + 1]->offset : store.padded_numel();
    if (!ranges.empty() && ranges.back().decay == decay)
      ranges.back().end = end;
    else
      ranges.push_back({by_offset[i]->offset, end, decay});
  }
  return ranges;
}

struct Layout {
  const char* what;
  std::vector<int64_t> sizes;  // parameters; the last one declared without decay when `mixed`
  bool mixed;
};

const Layout kLayouts[] = {
    {"one element", {1}, false},
    {"1000003 elements", {1000003}, false},
    {"weights 1000003 + no-decay bias 4099", {1000003, 4099}, true},
};

// Runs `config` on the CPU (make_optimizer) and on the GPU (`gpu_step` per
// range) from the same start and gradients, comparing after every step.
template <typename GpuStep>
void compare(GpuFixture& f, OptimizerConfig config, const Layout& layout, GpuStep&& gpu_step) {
  INFO(config.name << " momentum " << config.momentum << " nesterov " << config.nesterov << " wd "
                   << config.weight_decay << ": " << layout.what);
  config.decay_all = !layout.mixed;
  ParameterStore store;
  for (size_t i = 0; i < layout.sizes.size(); ++i)
    store.declare(fmt::format("p{}", i), Shape{layout.sizes[i]},
                  /*decay=*/!(layout.mixed && i + 1 == layout.sizes.size()));
  store.finalize();
  const int64_t n = store.padded_numel();
  const auto p0 = random_vector(n, 11);
  std::copy(p0.begin(), p0.end(), store.values().data<float>());
  auto opt = make_optimizer(store, config);
  const auto ranges = ranges_of(store, config.decay_all);
  REQUIRE(ranges.size() == (layout.mixed ? 2u : 1u));

  Tensor p = f.upload(Shape{n}, p0);
  Tensor g = f.device_zeros(Shape{n});
  std::vector<Tensor> state;  // device twins of opt->state(), zero like the CPU's
  for (size_t i = 0; i < opt->state().size(); ++i) state.push_back(f.device_zeros(Shape{n}));

  for (int step = 0; step < kSteps; ++step) {
    INFO("step " << step + 1);
    const auto grads = random_vector(n, 100 + step);
    std::copy(grads.begin(), grads.end(), store.grads().data<float>());
    g.copy_from(store.grads());
    const float lr = config.name == "sgd" ? 0.1f * static_cast<float>(step + 1) / kSteps
                                          : 1e-3f * static_cast<float>(step + 1);
    for (const Range& r : ranges) gpu_step(r, opt->steps(), lr, p, g, state);
    opt->step(lr, kGradScale);

    LS_REQUIRE_PARITY(f.download(p), store.values().to_vector(), 1e-6);
    const auto cpu_state = opt->state();
    REQUIRE(cpu_state.size() == state.size());
    for (size_t i = 0; i < state.size(); ++i) {
      INFO("state " << cpu_state[i].first);
      LS_REQUIRE_PARITY(f.download(state[i]), cpu_state[i].second->to_vector(), 1e-6);
    }
  }
}

void compare_sgd(GpuFixture& f, float momentum, bool nesterov, float weight_decay) {
  OptimizerConfig c;
  c.name = "sgd";
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.weight_decay = weight_decay;
  const cudaStream_t s = f.ctx.raw_stream();
  for (const Layout& layout : kLayouts)
    compare(f, c, layout,
            [&](const Range& r, int64_t, float lr, Tensor& p, Tensor& g, std::vector<Tensor>& state) {
              // The scalars as Sgd::update computes them.
              const float wd = r.decay ? c.weight_decay : 0.f, m = c.momentum;
              float* buf = m == 0.f ? nullptr : state.at(0).data<float>() + r.begin;
              ops::sgd_update_cuda(r.end - r.begin, p.data<float>() + r.begin, g.data<float>() + r.begin, buf, lr,
                              kGradScale, wd, m, c.nesterov, nullptr, s);
            });
}

void compare_adam(GpuFixture& f, const std::string& name, float weight_decay) {
  OptimizerConfig c;
  c.name = name;
  c.weight_decay = weight_decay;
  const bool decoupled = name == "adamw";
  const cudaStream_t s = f.ctx.raw_stream();
  for (const Layout& layout : kLayouts)
    compare(f, c, layout,
            [&](const Range& r, int64_t steps, float lr, Tensor& p, Tensor& g, std::vector<Tensor>& state) {
              // The scalars as Adam::update computes them (state: exp_avg, exp_avg_sq).
              const double t = static_cast<double>(steps + 1);
              const float b1 = c.beta1, b2 = c.beta2;
              const float step_size = static_cast<float>(lr / (1.0 - std::pow(static_cast<double>(b1), t)));
              const float inv_sqrt_bc2 =
                  static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(static_cast<double>(b2), t)));
              const float wd = r.decay ? c.weight_decay : 0.f;
              const float l2 = decoupled ? 0.f : wd;
              const float shrink = decoupled ? 1.f - lr * wd : 1.f;
              const ops::AdamScalars a{step_size, inv_sqrt_bc2, kGradScale, b1, b2, c.eps, l2, shrink};
              ops::adam_update_cuda(r.end - r.begin, p.data<float>() + r.begin, g.data<float>() + r.begin,
                                    state.at(0).data<float>() + r.begin, state.at(1).data<float>() + r.begin, a,
                                    0.f, nullptr, s);
            });
}

}  // namespace

TEST_CASE_METHOD(GpuFixture, "GPU SGD update matches Sgd: plain, momentum, Nesterov, weight decay", "[optim]") {
  SECTION("no momentum") { compare_sgd(*this, 0.f, false, 0.f); }
  SECTION("no momentum, weight decay") { compare_sgd(*this, 0.f, false, 5e-4f); }
  SECTION("momentum 0.9") { compare_sgd(*this, 0.9f, false, 0.f); }
  SECTION("momentum 0.9, weight decay") { compare_sgd(*this, 0.9f, false, 1e-2f); }
  SECTION("Nesterov, weight decay") { compare_sgd(*this, 0.9f, true, 5e-4f); }
}

TEST_CASE_METHOD(GpuFixture, "GPU Adam update matches Adam and AdamW", "[optim]") {
  SECTION("Adam") { compare_adam(*this, "adam", 0.f); }
  SECTION("Adam, L2 weight decay") { compare_adam(*this, "adam", 1e-2f); }
  SECTION("AdamW, decoupled weight decay") { compare_adam(*this, "adamw", 1e-2f); }
}

TEST_CASE_METHOD(GpuFixture, "GPU optimizer updates accept n = 0 and refuse momentum without a buffer", "[optim]") {
  const cudaStream_t s = ctx.raw_stream();
  ops::sgd_update_cuda(0, nullptr, nullptr, nullptr, 0.1f, 1.f, 0.f, 0.9f, false, nullptr, s);
  ops::adam_update_cuda(0, nullptr, nullptr, nullptr, nullptr, ops::AdamScalars{1e-3f, 1.f, 1.f, 0.9f, 0.999f, 1e-8f, 0.f, 1.f},
                        0.f, nullptr, s);
  Tensor p = device_zeros(Shape{4}), g = device_zeros(Shape{4});
  CHECK_THROWS_AS(ops::sgd_update_cuda(4, p.data<float>(), g.data<float>(), nullptr, 0.1f, 1.f, 0.f, 0.9f, false, nullptr, s),
                  Error);
  ctx.synchronize();
  LS_CUDA_CHECK(cudaGetLastError());
}
