// --layout nhwc end to end on the CPU: every built-in model computes the same
// logits, parameter gradients and input gradient in NHWC as in NCHW, from the
// same weights and the same NCHW batch (Sequential reorders the input and the
// input gradient; Flatten reorders back to the logical feature order).
//
// Tolerance: the NHWC convolution is another GEMM lowering (other summation
// order), and batch norm sums its values in memory order, so the two layouts
// agree to fp32 rounding, not bitwise. Per tensor, the relative L2 difference
// ||nhwc - nchw|| / ||nchw|| must be at most max(3e-5, 4 x control), where
// control is the same measure for a third run, in NCHW, on the input moved by
// a relative 2^-21 x N(0, 1): what a few roundings amount to after the
// network's amplification. Measured (2-core AMD EPYC, 2026-11-22): the
// shallow nets and resnet20 up to 4.6e-6; resnet50 up to 2.3e-2, at most 0.8x
// its control (which reaches 4e-2: at 64x64 and batch 8 its gradients are
// that sensitive to rounding, on the CPU alone). Pooling, global average
// pooling and the reorders are exact. Training mode throughout:
// batch norm normalises with batch statistics, and keras-cnn's dropout after
// its pooling layer (a 4-D tensor) must draw the same masks in both layouts
// (by logical element index), or its gradients would not agree.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "ops/elementwise/elementwise_cpu.h"
#include "ops/layout/layout_cpu.h"
#include "nn/batchnorm.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/residual.h"
#include "registry.h"

using namespace lockstep;

namespace {

struct Pass {
  std::vector<float> logits, input_grad;
  std::vector<std::vector<float>> grads;
};

// perturb > 0: each input value moved by a relative perturb x N(0, 1).
Pass run(Layout layout, const std::string& name, const Shape& sample, int64_t batch, float perturb = 0.f) {
  auto m = models::build_model(name, models::ModelSpec{sample, 10}, 7);
  m->net().set_layout(layout);
  Rng rng(11), noise(12);
  Tensor x = Tensor::zeros(m->batch_shape(batch));
  for (float& v : x.span<float>()) v = rng.normal();
  if (perturb > 0.f)
    for (float& v : x.span<float>()) v += v * perturb * noise.normal();
  ForwardContext fc;
  fc.seed = 5;
  fc.step = 3;
  const Tensor& logits = m->net().forward(x, fc);
  Tensor dy = m->net().output_grad();
  Rng r2(13);
  for (float& v : dy.span<float>()) v = r2.normal();
  Tensor dx = Tensor::zeros(x.shape());
  m->net().backward(BackwardContext{}, &dx);
  Pass p;
  p.logits = logits.to_vector();
  p.input_grad = dx.to_vector();
  for (const Parameter* q : m->net().parameters()) p.grads.push_back(q->grad.to_vector());
  return p;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
  return worst;
}

// The control run's input perturbation: a few fp32 roundings' worth (2^-21).
constexpr float kPerturb = 4.76837158e-07f;

// a (NHWC) against b (NCHW); `control`: the same tensor from an NCHW run on
// an input perturbed by kPerturb (what rounding differences amount to).
void check_close(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& control,
                 const std::string& what) {
  REQUIRE(a.size() == b.size());
  REQUIRE(control.size() == b.size());
  const double err = rel_l2(a, b), order = rel_l2(control, b);
  INFO(what << ": relative L2 nhwc vs nchw " << err << ", perturbed nchw vs nchw " << order
            << ", max |nhwc - nchw| " << max_diff(a, b));
  CHECK(err <= std::max(3e-5, 4 * order));
}

}  // namespace

TEST_CASE("every model computes the same in NHWC as in NCHW (CPU)", "[layout]") {
  struct Case {
    std::string model;
    Shape sample;
    int64_t batch;
  };
  // resnet50 at 64x64, batch 8: its last stage is 2x2, so batch norm there
  // normalises over 32 values per channel (over 3 at 32x32 and batch 3, where
  // fp32 summation order alone moved gradients by up to 30%).
  const std::vector<Case> cases{
      {"mlp", Shape{1, 28, 28}, 3},       {"lenet", Shape{1, 28, 28}, 3},    {"convnet", Shape{1, 28, 28}, 3},
      {"keras-cnn", Shape{1, 28, 28}, 3}, {"resnet20", Shape{3, 16, 16}, 3}, {"resnet50", Shape{3, 64, 64}, 8},
  };
  for (const Case& c : cases) {
    SECTION(c.model) {
      const Pass a = run(Layout::NCHW, c.model, c.sample, c.batch);
      const Pass b = run(Layout::NHWC, c.model, c.sample, c.batch);
      const Pass o = run(Layout::NCHW, c.model, c.sample, c.batch, kPerturb);
      check_close(b.logits, a.logits, o.logits, c.model + " logits");
      check_close(b.input_grad, a.input_grad, o.input_grad, c.model + " input gradient");
      REQUIRE(a.grads.size() == b.grads.size());
      for (size_t i = 0; i < a.grads.size(); ++i)
        check_close(b.grads[i], a.grads[i], o.grads[i], c.model + " parameter " + std::to_string(i) + " gradient");
    }
  }
}

TEST_CASE("set_layout reaches nested layers and changes only Flatten's aliasing", "[layout]") {
  auto m = models::build_model("lenet", models::ModelSpec{Shape{1, 28, 28}, 10}, 1);
  Tensor x = Tensor::zeros(m->batch_shape(2));
  m->net().forward(x, ForwardContext{});
  const std::vector<Aliasing> before = m->net().planned_aliasing();
  m->net().set_layout(Layout::NHWC);
  CHECK(m->net().layout() == Layout::NHWC);
  m->net().forward(x, ForwardContext{});
  const std::vector<Aliasing>& after = m->net().planned_aliasing();
  REQUIRE(before.size() == after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    INFO("layer " << i << ": " << m->net().layer(i).describe());
    if (m->net().layer(i).describe() == "Flatten()") {
      CHECK(before[i] == Aliasing::View);
      CHECK(after[i] == Aliasing::None);  // NHWC -> logical order is a copy
    } else {
      CHECK(before[i] == after[i]);
    }
  }
  // A residual block's chains take the layout without reordering their input again.
  auto r = models::build_model("resnet20", models::ModelSpec{Shape{3, 8, 8}, 10}, 1);
  r->net().set_layout(Layout::NHWC);
  int blocks = 0;
  for (size_t i = 0; i < r->net().size(); ++i)
    if (auto* res = dynamic_cast<Residual*>(&r->net().layer(i))) {
      ++blocks;
      CHECK(res->branch().layout() == Layout::NHWC);
    }
  CHECK(blocks == 9);
}

TEST_CASE("dropout draws the same masks by logical element in either layout", "[layout]") {
  // x [2, 3, 4, 5] in NCHW and the same values in NHWC: the NHWC output, put
  // back into NCHW order, equals the NCHW output (and so do the masks).
  const int64_t n = 2, c = 3, hw = 20, row = c * hw;
  Rng rng(3);
  std::vector<float> x(static_cast<size_t>(n * row)), xh(x.size()), y(x.size()), yh(x.size()), back(x.size());
  for (float& v : x) v = rng.normal();
  ops::nchw_to_nhwc_cpu(n, c, hw, x.data(), xh.data());
  std::vector<uint8_t> m(x.size()), mh(x.size());
  ops::dropout_forward_cpu(n, row, 17, 99, 0.4f, x.data(), y.data(), m.data());
  ops::dropout_forward_cpu(n, row, 17, 99, 0.4f, xh.data(), yh.data(), mh.data(), c);
  ops::nhwc_to_nchw_cpu(n, c, hw, yh.data(), back.data());
  CHECK(back == y);
  int dropped = 0;
  for (uint8_t k : m) dropped += k == 0;
  CHECK(dropped > 0);  // p = 0.4 over 120 elements: some are dropped, so the check means something
  CHECK_THROWS(ops::dropout_forward_cpu(n, row, 17, 99, 0.4f, x.data(), y.data(), m.data(), 7));  // 60 % 7 != 0
}

TEST_CASE("layout names parse as the --layout flag spells them", "[layout]") {
  CHECK(layout_from_name("nchw") == Layout::NCHW);
  CHECK(layout_from_name("nhwc") == Layout::NHWC);
  CHECK_FALSE(layout_from_name("NHWC").has_value());
  CHECK_FALSE(layout_from_name("").has_value());
  CHECK(layout_name(Layout::NHWC) == "nhwc");
}
