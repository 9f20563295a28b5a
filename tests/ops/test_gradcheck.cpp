// Finite-difference gradient checks for every layer and the loss.
//
// Method: L = sum_i y_i * r_i with fixed random r, so dL/dy = r. Each input and
// parameter element is perturbed by +-h and the central difference
// (L(+h) - L(-h)) / 2h, with L accumulated in double, is compared with the
// analytic gradient. Tolerance: |analytic - numeric| <= 2e-3 * max(1, |numeric|).
// Linear, Conv2d, AvgPool2d and Dropout (fixed mask) are linear in what is
// perturbed, so the difference is exact up to fp32 rounding (h = 1e-2); ReLU and
// MaxPool2d inputs are kept at least 0.05 away from their kinks (h = 1e-3).
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>

#include "core/cpu.h"
#include "core/rng.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/sequential.h"
#include "ops/conv2d.h"

using namespace lockstep;

namespace {

constexpr double kTol = 2e-3;

Tensor random_tensor(const Shape& s, Rng& rng, float scale = 1.f) {
  Tensor t = Tensor::zeros(s);
  for (float& v : t.span<float>()) v = scale * rng.normal();
  return t;
}

// Keeps values at least `gap` away from zero (ReLU kinks).
void push_from_zero(Tensor& t, float gap) {
  for (float& v : t.span<float>()) v = v >= 0 ? v + gap : v - gap;
}

struct Harness {
  std::unique_ptr<Module> m;
  ParameterStore store;
  ForwardContext fctx{true, 99, 3, 5};

  explicit Harness(std::unique_ptr<Module> mod, uint64_t seed = 1) : m(std::move(mod)) {
    m->declare(store, "m.");
    store.finalize();
    Rng rng(seed);
    m->init(rng);
  }

  double loss(const Tensor& x, const Tensor& r) {
    Tensor y = Tensor::zeros(m->output_shape(x.shape()));
    Tensor xc = Tensor::zeros(x.shape());
    xc.copy_from(x);  // in-place modules may overwrite their input
    m->forward(xc, y, fctx);
    double l = 0;
    for (int64_t i = 0; i < y.numel(); ++i) l += static_cast<double>(y.data<float>()[i]) * r.data<float>()[i];
    return l;
  }

  // Runs forward+backward; returns dL/dx (parameter gradients land in the store).
  Tensor analytic(const Tensor& x, const Tensor& r) {
    Tensor y = Tensor::zeros(m->output_shape(x.shape()));
    Tensor xc = Tensor::zeros(x.shape());
    xc.copy_from(x);
    m->forward(xc, y, fctx);
    Tensor dy = Tensor::zeros(y.shape());
    dy.copy_from(r);
    Tensor dx = Tensor::zeros(x.shape());
    m->backward(xc, y, dy, &dx, BackwardContext{false});
    return dx;
  }
};

// Compares analytic and numeric gradients of every element of `v` (a view of x
// or of a parameter). Returns the largest scaled error seen.
double check_elements(Tensor v, const Tensor& analytic, double h, const std::function<double()>& loss) {
  double worst = 0;
  float* p = v.data<float>();
  const float* a = analytic.data<float>();
  for (int64_t i = 0; i < v.numel(); ++i) {
    const float keep = p[i];
    p[i] = keep + static_cast<float>(h);
    const double lp = loss();
    p[i] = keep - static_cast<float>(h);
    const double lm = loss();
    p[i] = keep;
    const double numeric = (lp - lm) / (2 * h);
    const double err = std::abs(numeric - a[i]) / std::max(1.0, std::abs(numeric));
    worst = std::max(worst, err);
    INFO("element " << i << ": analytic " << a[i] << " numeric " << numeric);
    REQUIRE(err <= kTol);
  }
  return worst;
}

void gradcheck(std::unique_ptr<Module> mod, const Shape& in_shape, double h, bool away_from_zero = false,
               uint64_t seed = 1) {
  Harness hn(std::move(mod), seed);
  Rng rng(seed + 100);
  Tensor x = random_tensor(in_shape, rng);
  if (away_from_zero) push_from_zero(x, 0.05f);
  Tensor r = random_tensor(hn.m->output_shape(in_shape), rng);
  Tensor dx = hn.analytic(x, r);
  // Snapshot parameter gradients before perturbing anything.
  Tensor grads = Tensor::zeros(Shape{hn.store.padded_numel()});
  if (hn.store.padded_numel()) grads.copy_from(hn.store.grads());
  auto loss = [&] { return hn.loss(x, r); };
  check_elements(x, dx, h, loss);
  for (auto& p : hn.store.params()) {
    INFO("parameter " << p.name);
    check_elements(p.value, grads.slice(p.offset, p.shape), h, loss);
  }
}

}  // namespace

TEST_CASE("Linear gradients", "[gradcheck]") {
  gradcheck(std::make_unique<Linear>(7, 5), Shape{4, 7}, 1e-2);
  gradcheck(std::make_unique<Linear>(3, 2, false), Shape{1, 3}, 1e-2);
}

TEST_CASE("Conv2d gradients over kernel, stride and padding", "[gradcheck]") {
  gradcheck(std::make_unique<Conv2d>(2, 3, 3), Shape{2, 2, 6, 6}, 1e-2);                 // valid
  gradcheck(std::make_unique<Conv2d>(2, 3, 3, 1, 1), Shape{2, 2, 5, 5}, 1e-2);           // same
  gradcheck(std::make_unique<Conv2d>(3, 2, 5, 2, 2), Shape{2, 3, 7, 6}, 1e-2);           // strided, padded
  gradcheck(std::make_unique<Conv2d>(4, 3, 1), Shape{3, 4, 3, 3}, 1e-2);                 // 1x1
  gradcheck(std::make_unique<Conv2d>(1, 4, 2, 1, 0, false), Shape{5, 1, 3, 3}, 1e-2);    // chunked images, no bias
}

TEST_CASE("Winograd Conv2d gradients", "[gradcheck][winograd]") {
  for (int64_t pad : {0, 1, 2}) {
    auto conv = std::make_unique<Conv2d>(8, 3, 3, 1, pad);
    conv->set_algorithm(ops::ConvAlgo::Winograd);
    gradcheck(std::move(conv), Shape{2, 8, 5, 6}, 1e-2);  // odd and even output sizes
  }
  for (int64_t pad : {0, 2}) {  // 5x5, channels not a multiple of 8
    auto conv = std::make_unique<Conv2d>(5, 3, 5, 1, pad);
    conv->set_algorithm(ops::ConvAlgo::Winograd);
    gradcheck(std::move(conv), Shape{2, 5, 7, 6}, 1e-2);
  }
}

TEST_CASE("pooling gradients", "[gradcheck]") {
  gradcheck(std::make_unique<Pool2d>(PoolKind::Avg, 2), Shape{2, 3, 6, 6}, 1e-2);
  gradcheck(std::make_unique<Pool2d>(PoolKind::Avg, 3, 2), Shape{1, 2, 7, 8}, 1e-2);
  gradcheck(std::make_unique<Pool2d>(PoolKind::Avg, 2), Shape{1, 2, 5, 7}, 1e-2);  // odd sizes: floor mode
  // Max pooling: values on a grid 0.1 apart, shuffled, so no window has near-ties.
  for (const auto& [k, s, shape] : {std::tuple{2, 2, Shape{2, 2, 6, 6}}, std::tuple{3, 2, Shape{1, 2, 7, 7}},
                                    std::tuple{2, 2, Shape{1, 1, 5, 5}}}) {
    Harness hn(std::make_unique<Pool2d>(PoolKind::Max, k, s));
    Tensor x = Tensor::zeros(shape);
    Rng rng(3);
    std::vector<int64_t> order(static_cast<size_t>(x.numel()));
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
    for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 0.1f * static_cast<float>(order[static_cast<size_t>(i)]);
    Tensor r = random_tensor(hn.m->output_shape(shape), rng);
    Tensor dx = hn.analytic(x, r);
    check_elements(x, dx, 1e-3, [&] { return hn.loss(x, r); });
  }
}

TEST_CASE("ReLU, Dropout and Flatten gradients", "[gradcheck]") {
  gradcheck(std::make_unique<ReLU>(), Shape{3, 10}, 1e-3, /*away_from_zero=*/true);
  gradcheck(std::make_unique<Dropout>(0.4f), Shape{4, 9}, 1e-2);
  gradcheck(std::make_unique<Flatten>(), Shape{2, 3, 2, 2}, 1e-2);
}

TEST_CASE("softmax cross-entropy gradient", "[gradcheck]") {
  Rng rng(11);
  const int64_t B = 5, C = 7;
  Tensor logits = random_tensor(Shape{B, C}, rng, 2.f);
  Tensor labels = Tensor::zeros(Shape{B}, DType::I32);
  for (int64_t i = 0; i < B; ++i) labels.data<int32_t>()[i] = static_cast<int32_t>(rng.below(C));
  Tensor d = Tensor::zeros(Shape{B, C});
  softmax_cross_entropy_backward(logits, labels, 1.f / B, d);
  check_elements(logits, d, 1e-3, [&] { return softmax_cross_entropy(logits, labels).loss_sum / B; });
}

TEST_CASE("softmax cross-entropy values and accuracy", "[loss]") {
  Tensor logits = Tensor::from_vector(Shape{2, 3}, {1.f, 2.f, 3.f, 1000.f, 0.f, -1000.f});
  Tensor labels = Tensor::zeros(Shape{2}, DType::I32);
  labels.data<int32_t>()[0] = 2;
  labels.data<int32_t>()[1] = 1;
  const LossStats s = softmax_cross_entropy(logits, labels);
  const double l0 = std::log(std::exp(-2.0) + std::exp(-1.0) + 1.0);
  CHECK(s.loss_sum == Approx(l0 + 1000.0).epsilon(1e-9));  // stable with huge logits
  CHECK(s.correct == 1);
  labels.data<int32_t>()[1] = 3;
  CHECK_THROWS_AS(softmax_cross_entropy(logits, labels), Error);
}

TEST_CASE("Conv2d forward matches a direct double-precision convolution", "[conv]") {
  for (const auto& [c, oc, k, s, p, h, w] : {std::tuple{3, 4, 3, 1, 0, 8, 7}, std::tuple{2, 5, 5, 2, 2, 9, 9},
                                             std::tuple{1, 2, 3, 1, 1, 4, 4}}) {
    Harness hn(std::make_unique<Conv2d>(c, oc, k, s, p));
    Rng rng(5);
    Tensor x = random_tensor(Shape{3, c, h, w}, rng);
    const Shape ys = hn.m->output_shape(x.shape());
    Tensor y = Tensor::zeros(ys);
    hn.m->forward(x, y, {});
    const float* W = hn.store.params()[0].value.data<float>();
    const float* b = hn.store.params()[1].value.data<float>();
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t o = 0; o < oc; ++o)
        for (int64_t oy = 0; oy < ys[2]; ++oy)
          for (int64_t ox = 0; ox < ys[3]; ++ox) {
            double acc = b[o];
            for (int64_t ci = 0; ci < c; ++ci)
              for (int64_t ky = 0; ky < k; ++ky)
                for (int64_t kx = 0; kx < k; ++kx) {
                  const int64_t iy = oy * s - p + ky, ix = ox * s - p + kx;
                  if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                  acc += static_cast<double>(W[((o * c + ci) * k + ky) * k + kx]) *
                         x.data<float>()[((n * c + ci) * h + iy) * w + ix];
                }
            const float got = y.data<float>()[((n * oc + o) * ys[2] + oy) * ys[3] + ox];
            REQUIRE(got == Approx(acc).margin(1e-5).epsilon(1e-5));
          }
  }
}

TEST_CASE("Winograd and im2col Conv2d agree in forward and backward", "[conv][winograd]") {
  // Also covers channels that are not a multiple of 8 (padded inside Winograd),
  // pad = k - 1, and odd output sizes.
  struct Case {
    int64_t c, oc, k, pad, h, w, n;
    bool relu;
  };
  for (const Case& k : {Case{8, 16, 3, 0, 26, 26, 3, true}, Case{16, 8, 3, 1, 7, 7, 5, false},
                        Case{8, 8, 3, 1, 14, 9, 2, true}, Case{24, 4, 3, 2, 5, 5, 4, false},
                        Case{8, 5, 3, 0, 3, 3, 7, true}, Case{3, 6, 3, 1, 8, 8, 2, false},
                        Case{20, 50, 5, 0, 13, 13, 4, true}, Case{16, 8, 5, 2, 12, 11, 3, false},
                        Case{11, 4, 5, 4, 5, 6, 2, true}}) {
    INFO("C=" << k.c << " OC=" << k.oc << " k=" << k.k << " pad=" << k.pad << " " << k.h << "x" << k.w
              << " relu=" << k.relu);
    // Runs: im2col on 1 thread, Winograd on 1 thread, Winograd with the batch split over 2 threads.
    std::vector<float> out[3];
    for (int run = 0; run < 3; ++run) {
      set_compute_threads(run == 2 ? 2 : 1);
      Sequential net;
      auto conv = std::make_unique<Conv2d>(k.c, k.oc, k.k, 1, k.pad);
      conv->set_algorithm(run == 0 ? ops::ConvAlgo::Im2col : ops::ConvAlgo::Winograd);
      net.add(std::move(conv));
      if (k.relu) net.add(std::make_unique<ReLU>());
      net.add(std::make_unique<Flatten>());
      ParameterStore store;
      net.declare(store);
      store.finalize();
      Rng init(21);
      net.init(init);
      Rng rng(22);
      Tensor x = random_tensor(Shape{k.n, k.c, k.h, k.w}, rng);
      const Tensor& y = net.forward(x, {});
      out[run] = y.to_vector();
      Tensor d = net.output_grad();
      for (float& v : d.span<float>()) v = rng.normal();
      net.backward({});
      const auto g = store.grads().to_vector();
      out[run].insert(out[run].end(), g.begin(), g.end());
      // Sequential never computes its first layer's input gradient: check dx on the layer itself.
      auto& layer = dynamic_cast<Conv2d&>(net.layer(0));
      Tensor dy = Tensor::zeros(layer.output_shape(x.shape()));
      Tensor yy = Tensor::zeros(dy.shape());
      layer.forward(x, yy, {});
      for (float& v : dy.span<float>()) v = rng.normal();
      Tensor dx = Tensor::zeros(x.shape());
      layer.backward(x, yy, dy, &dx, BackwardContext{});
      const auto dxv = dx.to_vector();
      out[run].insert(out[run].end(), dxv.begin(), dxv.end());
    }
    set_compute_threads(1);
    for (int run = 1; run < 3; ++run) {
      REQUIRE(out[0].size() == out[run].size());
      double worst = 0, scale = 0;
      for (size_t i = 0; i < out[0].size(); ++i) {
        worst = std::max(worst, static_cast<double>(std::abs(out[0][i] - out[run][i])));
        scale = std::max(scale, static_cast<double>(std::abs(out[0][i])));
      }
      // Winograd reorders and rescales fp32 sums (F(2,5)'s transforms hold
      // constants up to 5 and 1/24); measured error is below 4e-6 of the largest value.
      const double tol = 2e-5;
      INFO("run " << run << ": max abs difference " << worst << " of max magnitude " << scale);
      CHECK(worst <= tol * std::max(1.0, scale));
    }
  }
}

TEST_CASE("accumulating backward adds to the parameter gradients", "[gradcheck]") {
  Harness hn(std::make_unique<Conv2d>(2, 3, 3, 1, 1));
  Rng rng(8);
  Tensor x = random_tensor(Shape{2, 2, 5, 5}, rng);
  Tensor r = random_tensor(hn.m->output_shape(x.shape()), rng);
  hn.analytic(x, r);
  const std::vector<float> once = hn.store.grads().to_vector();
  Tensor y = Tensor::zeros(hn.m->output_shape(x.shape()));
  hn.m->forward(x, y, {});
  Tensor dy = Tensor::zeros(y.shape());
  dy.copy_from(r);
  hn.m->backward(x, y, dy, nullptr, BackwardContext{true});
  const std::vector<float> twice = hn.store.grads().to_vector();
  for (size_t i = 0; i < once.size(); ++i) REQUIRE(twice[i] == Approx(2 * once[i]).margin(1e-6));
}

TEST_CASE("fused Conv2d/Linear + ReLU matches the unfused layers bitwise", "[fusion]") {
  auto build = [] {
    Sequential net;
    net.add(std::make_unique<Conv2d>(2, 4, 3, 1, 1));
    net.add(std::make_unique<ReLU>());
    net.add(std::make_unique<Pool2d>(PoolKind::Max, 2));
    net.add(std::make_unique<Flatten>());
    net.add(std::make_unique<Linear>(4 * 3 * 3, 6));
    net.add(std::make_unique<ReLU>());
    net.add(std::make_unique<Dropout>(0.3f));
    net.add(std::make_unique<Linear>(6, 3));
    return net;
  };
  std::vector<float> results[2];
  for (int fused = 0; fused < 2; ++fused) {
    Sequential net = build();
    net.set_fusion(fused == 1);
    ParameterStore store;
    net.declare(store);
    store.finalize();
    Rng init(4);
    net.init(init);
    Rng rng(9);
    Tensor x = random_tensor(Shape{5, 2, 6, 6}, rng);
    const Tensor& y = net.forward(x, ForwardContext{true, 1, 2, 0});
    results[fused] = y.to_vector();
    Tensor d = net.output_grad();
    for (float& v : d.span<float>()) v = rng.normal();
    net.backward({});
    const auto g = store.grads().to_vector();
    results[fused].insert(results[fused].end(), g.begin(), g.end());
    CHECK((fused == 1) == (net.planned_aliasing()[1] == Aliasing::Fused));
  }
  CHECK(results[0] == results[1]);
}
