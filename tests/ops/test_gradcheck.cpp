// Finite-difference gradient checks for every layer and the loss.
//
// Method: L = sum_i y_i * r_i with fixed random r, so dL/dy = r. Each input and
// parameter element is perturbed by +-h and the central difference
// (L(+h) - L(-h)) / 2h, with L accumulated in double, is compared with the
// analytic gradient. Tolerance: |analytic - numeric| <= 2e-3 * max(1, |numeric|).
// Linear, Conv2d, AvgPool2d and Dropout (fixed mask) are linear in what is
// perturbed, so the difference is exact up to fp32 rounding (h = 1e-2); ReLU and
// MaxPool2d inputs are kept at least 0.05 away from their kinks (h = 1e-3).
// LayerNorm is smooth but not linear: h = 1e-2, where the truncation error
// (h^2 times third derivatives) is still below the fp32 rounding of the loss
// over 2h (worst errors measured 1.2e-4 at h = 1e-2, 1e-3 at h = 1e-3).
// CausalSelfAttention is smooth but not linear (h = 1e-2): with standard normal
// inputs its third derivatives are of order 1, so the central difference is
// off by about h^2 / 6 ~ 2e-5, and fp32 rounding of L (a few hundred terms of
// order 1) adds about 1e-6 / 2h ~ 5e-5: both far inside the tolerance.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <set>

#include "core/cpu.h"
#include "core/rng.h"
#include "nn/attention.h"
#include "nn/batchnorm.h"
#include "nn/layernorm.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/residual.h"
#include "nn/sequential.h"
#include "ops/conv/conv2d_cpu.h"
#include "ops/elementwise/elementwise_cpu.h"

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
  ParameterStore buffers;  // batch norm running statistics
  ForwardContext fctx{true, 99, 3, 5};

  explicit Harness(std::unique_ptr<Module> mod, uint64_t seed = 1) : m(std::move(mod)) {
    m->declare(store, "m.");
    store.finalize();
    m->declare_buffers(buffers, "m.");
    buffers.finalize();
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
// `kinks`, when given, returns a signature of the function's non-smooth
// choices (which ReLUs are active); an element whose +-h perturbation changes
// it straddles a kink and is skipped (the caller bounds how many are).
double check_elements(Tensor v, const Tensor& analytic, double h, const std::function<double()>& loss,
                      const std::function<uint64_t()>& kinks = {}, int64_t* skipped = nullptr) {
  double worst = 0;
  float* p = v.data<float>();
  const float* a = analytic.data<float>();
  const uint64_t base = kinks ? kinks() : 0;
  for (int64_t i = 0; i < v.numel(); ++i) {
    const float keep = p[i];
    p[i] = keep + static_cast<float>(h);
    const double lp = loss();
    const bool crossed_up = kinks && kinks() != base;
    p[i] = keep - static_cast<float>(h);
    const double lm = loss();
    const bool crossed_down = kinks && kinks() != base;
    p[i] = keep;
    if (crossed_up || crossed_down) {
      ++*skipped;
      continue;
    }
    const double numeric = (lp - lm) / (2 * h);
    const double err = std::abs(numeric - a[i]) / std::max(1.0, std::abs(numeric));
    worst = std::max(worst, err);
    INFO("element " << i << ": analytic " << a[i] << " numeric " << numeric);
    REQUIRE(err <= kTol);
  }
  return worst;
}

// The analytic gradients of the input x and of every parameter against
// central differences of L = sum y * r, the module's parameters as they are.
void check_input_and_parameters(Harness& hn, const Tensor& x, const Tensor& r, double h) {
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

void gradcheck(std::unique_ptr<Module> mod, const Shape& in_shape, double h, bool away_from_zero = false,
               uint64_t seed = 1) {
  Harness hn(std::move(mod), seed);
  Rng rng(seed + 100);
  Tensor x = random_tensor(in_shape, rng);
  if (away_from_zero) push_from_zero(x, 0.05f);
  Tensor r = random_tensor(hn.m->output_shape(in_shape), rng);
  check_input_and_parameters(hn, x, r, h);
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
    conv->set_conv_algorithm(ops::ConvAlgo::Winograd);
    gradcheck(std::move(conv), Shape{2, 8, 5, 6}, 1e-2);  // odd and even output sizes
  }
  for (int64_t pad : {0, 2}) {  // 5x5, channels not a multiple of 8
    auto conv = std::make_unique<Conv2d>(5, 3, 5, 1, pad);
    conv->set_conv_algorithm(ops::ConvAlgo::Winograd);
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

TEST_CASE("GELU (tanh approximation): values and slopes as PyTorch's, gradient by finite differences", "[gradcheck]") {
  // torch.nn.functional.gelu(x, approximate="tanh") and its autograd slope, in
  // double (PyTorch 1.13).
  const std::vector<float> x = {-3.f, -1.f, -0.5f, 0.f, 0.5f, 1.f, 2.f, 4.f};
  const std::vector<double> y_torch = {-0.00363739208177, -0.158808009392, -0.154285990175, 0,
                                       0.345714009825,    0.841191990608,  1.95459769409,   3.99992975405};
  const std::vector<double> slope_torch = {-0.011584166631, -0.0829640838458, 0.132630096465, 0.5,
                                           0.867369903535,  1.08296408385,    1.08609925662,  1.0003351232};
  const auto n = static_cast<int64_t>(x.size());
  std::vector<float> y(x.size()), dx(x.size()), ones(x.size(), 1.f);
  ops::gelu_forward_cpu(n, x.data(), y.data());
  ops::gelu_backward_cpu(n, x.data(), ones.data(), dx.data());
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("x = " << x[i]);
    CHECK(std::abs(y[i] - y_torch[i]) <= 1e-6 * std::max(1.0, std::abs(y_torch[i])));
    CHECK(std::abs(dx[i] - slope_torch[i]) <= 1e-6 * std::max(1.0, std::abs(slope_torch[i])));
  }
  // In place, and through the layer with a real upstream gradient.
  std::vector<float> z = x;
  ops::gelu_forward_cpu(n, z.data(), z.data());
  CHECK(z == y);
  gradcheck(std::make_unique<GELU>(), Shape{4, 9}, 1e-2);
  gradcheck(std::make_unique<GELU>(), Shape{2, 3, 4, 4}, 1e-2, false, 7);
}

TEST_CASE("LayerNorm gradients of the input, weight and bias", "[gradcheck][layernorm]") {
  // Rows of rank 2 and 3, C not a multiple of 8; weight and bias away from
  // their initial 1 and 0, so dx sees the weight.
  for (const auto& [c, shape] : {std::pair{int64_t{5}, Shape{3, 5}}, std::pair{int64_t{19}, Shape{2, 3, 19}},
                                 std::pair{int64_t{40}, Shape{2, 40}}}) {
    INFO("x " << shape.str());
    Harness hn(std::make_unique<LayerNorm>(c));
    Rng rng(static_cast<uint64_t>(c));
    for (float& v : hn.store.params()[0].value.span<float>()) v = 1.f + 0.5f * rng.normal();
    for (float& v : hn.store.params()[1].value.span<float>()) v = 0.5f * rng.normal();
    const Tensor x = random_tensor(shape, rng);
    const Tensor r = random_tensor(shape, rng);
    check_input_and_parameters(hn, x, r, 1e-2);
  }
}

TEST_CASE("CausalSelfAttention gradients", "[gradcheck][attention]") {
  // x [B, T, 3C]: one head of 4 channels, two of 2, four of 3, and 70
  // positions (two row chunks of the kernels).
  gradcheck(std::make_unique<CausalSelfAttention>(1), Shape{2, 5, 3 * 4}, 1e-2);
  gradcheck(std::make_unique<CausalSelfAttention>(2), Shape{2, 4, 3 * 4}, 1e-2);
  gradcheck(std::make_unique<CausalSelfAttention>(4), Shape{1, 6, 3 * 12}, 1e-2);
  gradcheck(std::make_unique<CausalSelfAttention>(1), Shape{1, 70, 3 * 2}, 1e-2);
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
  // Label smoothing: the target (1 - eps) onehot + eps / C sums to 1, so every row's gradient sums to 0.
  for (const float eps : {0.1f, 0.3f, 0.9f}) {
    INFO("label smoothing " << eps);
    Tensor ds = Tensor::zeros(Shape{B, C});
    softmax_cross_entropy_backward(logits, labels, 1.f / B, ds, eps);
    check_elements(logits, ds, 1e-3, [&] { return softmax_cross_entropy(logits, labels, eps).loss_sum / B; });
    for (int64_t i = 0; i < B; ++i) {
      double row = 0;
      for (int64_t j = 0; j < C; ++j) row += ds.data<float>()[i * C + j];
      CHECK(row == Approx(0.0).margin(1e-6));
    }
  }
}

TEST_CASE("label smoothing: values by hand, eps = 0 bitwise the plain loss", "[loss]") {
  Tensor logits = Tensor::from_vector(Shape{2, 3}, {1.f, 2.f, 3.f, 1000.f, 0.f, -1000.f});
  Tensor labels = Tensor::zeros(Shape{2}, DType::I32);
  labels.data<int32_t>()[0] = 2;
  labels.data<int32_t>()[1] = 1;
  // Row 0, eps 0.1: q = (1/30, 1/30, 28/30); -sum q_j (z_j - lse) = lse - (1/30 + 2/30 + 84/30) = lse - 2.9,
  // lse = 3 + log(e^-2 + e^-1 + 1). Row 1: log p = (0, -1000, -2000), q = (1/30, 28/30, 1/30):
  // 28/30 * 1000 + 1/30 * 2000 = 1000.
  const double l0 = std::log(std::exp(-2.0) + std::exp(-1.0) + 1.0);
  const LossStats s = softmax_cross_entropy(logits, labels, 0.1f);
  CHECK(s.loss_sum == Approx(3.0 + l0 - 2.9 + 1000.0).epsilon(1e-7));
  CHECK(s.correct == 1);
  // dlogits of row 0 at scale 1: softmax - q.
  Tensor d = Tensor::zeros(Shape{2, 3});
  softmax_cross_entropy_backward(logits, labels, 1.f, d, 0.1f);
  const double e = std::exp(-2.0) + std::exp(-1.0) + 1.0;
  const double expect[3] = {std::exp(-2.0) / e - 0.1 / 3, std::exp(-1.0) / e - 0.1 / 3, 1.0 / e - 0.1 / 3 - 0.9};
  for (int j = 0; j < 3; ++j) CHECK(d.data<float>()[j] == Approx(expect[j]).margin(1e-6));

  // eps = 0 is the one-hot loss, bit for bit, forward and backward.
  Rng rng(3);
  Tensor z = random_tensor(Shape{6, 10}, rng, 3.f);
  Tensor y = Tensor::zeros(Shape{6}, DType::I32);
  for (int64_t i = 0; i < 6; ++i) y.data<int32_t>()[i] = static_cast<int32_t>(rng.below(10));
  CHECK(softmax_cross_entropy(z, y, 0.f).loss_sum == softmax_cross_entropy(z, y).loss_sum);
  Tensor a = Tensor::zeros(Shape{6, 10}), b = Tensor::zeros(Shape{6, 10});
  softmax_cross_entropy_backward(z, y, 0.25f, a);
  softmax_cross_entropy_backward(z, y, 0.25f, b, 0.f);
  CHECK(std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0);
  // Smoothing changes both (so the comparison above is not vacuous).
  CHECK(softmax_cross_entropy(z, y, 0.1f).loss_sum != softmax_cross_entropy(z, y).loss_sum);
  CHECK_THROWS_AS(softmax_cross_entropy(z, y, 1.f), Error);
  CHECK_THROWS_AS(softmax_cross_entropy(z, y, -0.1f), Error);
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
  // pad = k - 1, odd output sizes, and products both inside and past the
  // shapes sgemm_small's own kernel takes.
  struct Case {
    int64_t c, oc, k, pad, h, w, n;
    bool relu;
  };
  std::set<int64_t> tiles_seen;  // 10 * kernel + output tile side
  for (const Case& k : {Case{8, 16, 3, 0, 26, 26, 3, true}, Case{16, 8, 3, 1, 7, 7, 5, false},
                        Case{8, 8, 3, 1, 14, 9, 2, true}, Case{24, 4, 3, 2, 5, 5, 4, false},
                        Case{8, 5, 3, 0, 3, 3, 7, true}, Case{3, 6, 3, 1, 8, 8, 2, false},
                        Case{20, 50, 5, 0, 13, 13, 4, true}, Case{16, 8, 5, 2, 12, 11, 3, false},
                        Case{11, 4, 5, 4, 5, 6, 2, true},
                        // F(4x4, 3x3): 32x32 outputs, batch 8 (512 tiles); with odd sizes.
                        Case{8, 16, 3, 1, 32, 32, 8, true}, Case{16, 12, 3, 0, 31, 29, 9, false},
                        // Over 128 channels: products sgemm_small hands to OpenBLAS
                        // (F(4x4, 3x3) and F(2x2, 3x3)), in chunks of 128 tiles with a
                        // short last one (batch 5 of 64 tiles: 2, 2, 1 images; batch 7 of
                        // 25: 6, 1).
                        Case{136, 8, 3, 1, 32, 32, 5, true}, Case{8, 136, 3, 1, 5, 5, 2, false},
                        Case{144, 136, 3, 1, 9, 9, 7, true}}) {
    INFO("C=" << k.c << " OC=" << k.oc << " k=" << k.k << " pad=" << k.pad << " " << k.h << "x" << k.w
              << " relu=" << k.relu);
    const int64_t oh = k.h + 2 * k.pad - k.k + 1, ow = k.w + 2 * k.pad - k.k + 1;
    tiles_seen.insert(k.k * 10 + ops::conv2d_winograd_output_tile({k.n, k.oc, {k.c, k.h, k.w, k.k, k.k, 1, k.pad, oh, ow}}));
    // Runs: im2col on 1 thread, Winograd on 1 thread, Winograd with the batch split over 2 threads.
    std::vector<float> out[3];
    for (int run = 0; run < 3; ++run) {
      set_compute_threads(run == 2 ? 2 : 1);
      Sequential net;
      auto conv = std::make_unique<Conv2d>(k.c, k.oc, k.k, 1, k.pad);
      conv->set_conv_algorithm(run == 0 ? ops::ConvAlgo::Im2col : ops::ConvAlgo::Winograd);
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
      // Winograd reorders and rescales fp32 sums (the alpha = 6 transforms of
      // F(4,3) and F(2,5) hold constants from 1/15 to 5/2). Measured, as a
      // fraction of the largest value: F(4,3) up to 4.4e-6 (31x29), F(2,5)
      // 3.3e-6, F(2,3) 1e-6.
      const double tol = 2e-5;
      INFO("run " << run << ": max abs difference " << worst << " of max magnitude " << scale);
      CHECK(worst <= tol * std::max(1.0, scale));
    }
  }
  CHECK(tiles_seen == std::set<int64_t>{32, 34, 52});  // F(2x2, 3x3), F(4x4, 3x3), F(2x2, 5x5)
}

TEST_CASE("Winograd conv2d backward with an empty batch overwrites or keeps dw and db", "[conv][winograd]") {
  // After a call with images, the workspace holds that call's weight-gradient
  // sums; an empty batch must not hand them back as its gradient. (One image
  // before it: the same chunking, so the same place in the workspace.)
  Rng rng(31);
  const auto shape = [](int64_t n) { return ops::Conv2dShape{n, 16, {16, 8, 8, 3, 3, 1, 1, 8, 8}}; };
  const ops::Conv2dShape full = shape(1), empty = shape(0);
  std::vector<float> x(16 * 64), w(16 * 16 * 9), y(16 * 64);
  for (float& v : x) v = rng.normal();
  for (float& v : w) v = rng.normal();
  std::vector<float> dy = y;
  for (float& v : dy) v = rng.normal();
  for (bool accumulate : {false, true}) {
    INFO("accumulate=" << accumulate);
    ops::Workspace ws;
    std::vector<float> dw(w.size()), db(16);
    ops::conv2d_winograd_forward_cpu(full, x.data(), w.data(), nullptr, y.data(), false, ws);
    ops::conv2d_winograd_backward_cpu(full, x.data(), w.data(), y.data(), dy.data(), nullptr, dw.data(), db.data(),
                                      false, false, ws);
    const std::vector<float> dw0 = dw, db0 = db;
    REQUIRE(std::any_of(dw0.begin(), dw0.end(), [](float v) { return v != 0.f; }));
    ops::conv2d_winograd_backward_cpu(empty, nullptr, w.data(), nullptr, nullptr, nullptr, dw.data(), db.data(),
                                      accumulate, false, ws);
    CHECK(dw == (accumulate ? dw0 : std::vector<float>(dw.size(), 0.f)));
    CHECK(db == (accumulate ? db0 : std::vector<float>(db.size(), 0.f)));
  }
}

TEST_CASE("Winograd conv2d backward with accumulate adds exactly the fresh dw and db", "[conv][winograd]") {
  // The weight-gradient back-transform runs 8 input channels at a time, with a
  // scalar tail: cover a full group (16), a tail (11), both kernel sizes and
  // both output tiles (32x32 at batch 4 is F(4x4, 3x3)).
  struct Case {
    int64_t c, k, h;
  };
  std::set<int64_t> tiles_seen;  // 10 * kernel + output tile side
  for (const Case& k : {Case{16, 3, 8}, Case{11, 3, 9}, Case{11, 5, 7}, Case{16, 3, 32}}) {
    INFO("C=" << k.c << " k=" << k.k << " " << k.h << "x" << k.h);
    const int64_t oc = 12, n = 4, pad = k.k / 2;
    const ops::Conv2dShape s{n, oc, {k.c, k.h, k.h, k.k, k.k, 1, pad, k.h, k.h}};
    tiles_seen.insert(k.k * 10 + ops::conv2d_winograd_output_tile(s));
    Rng rng(41);
    std::vector<float> x(n * k.c * k.h * k.h), w(oc * k.c * k.k * k.k), y(n * oc * k.h * k.h);
    for (float& v : x) v = rng.normal();
    for (float& v : w) v = rng.normal();
    std::vector<float> dy(y.size());
    for (float& v : dy) v = rng.normal();
    std::vector<float> prev_w(w.size()), prev_b(oc);
    for (float& v : prev_w) v = rng.normal();
    for (float& v : prev_b) v = rng.normal();
    ops::Workspace ws;
    std::vector<float> fresh_w(w.size()), fresh_b(oc), dx(x.size());
    ops::conv2d_winograd_forward_cpu(s, x.data(), w.data(), nullptr, y.data(), false, ws);
    std::vector<float> g = dy;
    ops::conv2d_winograd_backward_cpu(s, x.data(), w.data(), y.data(), g.data(), dx.data(), fresh_w.data(),
                                      fresh_b.data(), false, false, ws);
    std::vector<float> acc_w = prev_w, acc_b = prev_b;
    g = dy;
    ops::conv2d_winograd_backward_cpu(s, x.data(), w.data(), y.data(), g.data(), dx.data(), acc_w.data(),
                                      acc_b.data(), true, false, ws);
    REQUIRE(std::any_of(fresh_w.begin(), fresh_w.end(), [](float v) { return v != 0.f; }));
    for (size_t i = 0; i < w.size(); ++i) REQUIRE(acc_w[i] == prev_w[i] + fresh_w[i]);
    for (int64_t i = 0; i < oc; ++i) REQUIRE(acc_b[i] == prev_b[i] + fresh_b[i]);
  }
  CHECK(tiles_seen == std::set<int64_t>{32, 34, 52});
}

TEST_CASE("Conv2d picks Winograd only where it pays: enough channels and tiles", "[conv][winograd]") {
  // n images of an s x s input, C -> OC channels, k x k kernel, stride, pad k / 2.
  const auto shape = [](int64_t n, int64_t c, int64_t oc, int64_t k, int64_t stride, int64_t s) {
    const int64_t pad = k / 2, o = (s + 2 * pad - k) / stride + 1;
    return ops::Conv2dShape{n, oc, {c, s, s, k, k, stride, pad, o, o}};
  };
  using ops::ConvAlgo;
  CHECK(ops::conv2d_choose(shape(32, 64, 64, 3, 1, 8), ConvAlgo::Auto) == ConvAlgo::Winograd);    // 512 tiles
  CHECK(ops::conv2d_choose(shape(64, 512, 512, 3, 1, 2), ConvAlgo::Auto) == ConvAlgo::Winograd);  // 64 tiles
  CHECK(ops::conv2d_choose(shape(32, 512, 512, 3, 1, 2), ConvAlgo::Auto) == ConvAlgo::Im2col);    // 32 tiles
  CHECK(ops::conv2d_choose(shape(64, 8, 64, 3, 1, 8), ConvAlgo::Auto) == ConvAlgo::Im2col);       // 8 channels in
  CHECK(ops::conv2d_choose(shape(64, 64, 8, 5, 1, 8), ConvAlgo::Auto) == ConvAlgo::Im2col);       // 8 channels out
  CHECK(ops::conv2d_choose(shape(64, 64, 64, 3, 2, 8), ConvAlgo::Auto) == ConvAlgo::Im2col);      // stride 2
  CHECK(ops::conv2d_choose(shape(64, 64, 64, 1, 1, 8), ConvAlgo::Auto) == ConvAlgo::Im2col);      // 1x1
  // Forcing: Winograd wherever it applies, im2col always.
  CHECK(ops::conv2d_choose(shape(32, 512, 512, 3, 1, 2), ConvAlgo::Winograd) == ConvAlgo::Winograd);
  CHECK(ops::conv2d_choose(shape(64, 64, 64, 3, 2, 8), ConvAlgo::Winograd) == ConvAlgo::Im2col);
  CHECK(ops::conv2d_choose(shape(32, 64, 64, 3, 1, 8), ConvAlgo::Im2col) == ConvAlgo::Im2col);
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

// ------------------------------------------------------------ ResNet layers

TEST_CASE("BatchNorm2d gradients with batch statistics", "[gradcheck][batchnorm]") {
  // Smooth in x, gamma and beta (the batch mean and variance depend on x).
  gradcheck(std::make_unique<BatchNorm2d>(3), Shape{4, 3, 3, 2}, 3e-3);
  gradcheck(std::make_unique<BatchNorm2d>(2), Shape{2, 2, 5, 5}, 3e-3, false, 7);
  gradcheck(std::make_unique<BatchNorm2d>(1), Shape{5, 1, 1, 1}, 3e-3, false, 3);  // statistics over the batch only
}

TEST_CASE("BatchNorm2d gradients with running statistics (evaluation)", "[gradcheck][batchnorm]") {
  Harness hn(std::make_unique<BatchNorm2d>(3));
  Rng rng(12);
  // Running statistics away from their initial (0, 1), so the check covers them.
  for (auto& b : hn.buffers.params())
    for (float& v : b.value.span<float>()) v = b.name.ends_with("running_var") ? 0.5f + rng.uniform(0.f, 1.f) : rng.normal();
  for (auto& p : hn.store.params())
    for (float& v : p.value.span<float>()) v = rng.normal();
  hn.fctx.training = false;
  const Shape shape{3, 3, 2, 4};
  Tensor x = random_tensor(shape, rng);
  Tensor r = random_tensor(shape, rng);
  check_input_and_parameters(hn, x, r, 1e-2);
}

TEST_CASE("BatchNorm2d statistics: normalised output, running averages, evaluation", "[batchnorm]") {
  Harness hn(std::make_unique<BatchNorm2d>(2, 1e-5f, 0.1f));
  Rng rng(5);
  const Shape shape{6, 2, 3, 3};
  Tensor x = random_tensor(shape, rng, 3.f);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] += (i / 9) % 2 ? 5.f : -2.f;  // channel offsets
  Tensor y = Tensor::zeros(shape);
  hn.m->forward(x, y, hn.fctx);
  const int64_t M = 6 * 9;
  for (int64_t c = 0; c < 2; ++c) {
    double sx = 0, sxx = 0, sy = 0, syy = 0;
    for (int64_t n = 0; n < 6; ++n)
      for (int64_t i = 0; i < 9; ++i) {
        const double xv = x.data<float>()[(n * 2 + c) * 9 + i], yv = y.data<float>()[(n * 2 + c) * 9 + i];
        sx += xv, sxx += xv * xv, sy += yv, syy += yv * yv;
      }
    const double mean = sx / M, var = sxx / M - mean * mean;
    CHECK(sy / M == Approx(0).margin(1e-5));
    CHECK(syy / M == Approx(var / (var + 1e-5)).epsilon(1e-4));
    // PyTorch's update: momentum 0.1, unbiased variance.
    CHECK(hn.buffers.params()[0].value.data<float>()[c] == Approx(0.1 * mean).epsilon(1e-5));
    CHECK(hn.buffers.params()[1].value.data<float>()[c] == Approx(0.9 + 0.1 * var * M / (M - 1)).epsilon(1e-5));
  }
  // Evaluation normalises with the running statistics, not the batch's.
  const float rm = hn.buffers.params()[0].value.data<float>()[1], rv = hn.buffers.params()[1].value.data<float>()[1];
  hn.fctx.training = false;
  hn.m->forward(x, y, hn.fctx);
  CHECK(y.data<float>()[9] == Approx((x.data<float>()[9] - rm) / std::sqrt(rv + 1e-5f)).epsilon(1e-5));
}

TEST_CASE("BatchNorm2d with a fused ReLU matches BatchNorm2d then ReLU bitwise", "[batchnorm][fusion]") {
  std::vector<float> results[2];
  for (int fused = 0; fused < 2; ++fused) {
    Sequential net;
    net.add(std::make_unique<Conv2d>(2, 4, 3, 1, 1, false));
    net.add(std::make_unique<BatchNorm2d>(4));
    net.add(std::make_unique<ReLU>());
    net.add(std::make_unique<GlobalAvgPool>());
    net.add(std::make_unique<Linear>(4, 3));
    net.set_fusion(fused == 1);
    ParameterStore store, buffers;
    net.declare(store);
    store.finalize();
    net.declare_buffers(buffers);
    buffers.finalize();
    Rng init(4);
    net.init(init);
    Rng rng(9);
    Tensor x = random_tensor(Shape{5, 2, 6, 6}, rng);
    results[fused] = net.forward(x, ForwardContext{}).to_vector();
    Tensor d = net.output_grad();
    for (float& v : d.span<float>()) v = rng.normal();
    net.backward({});
    for (const Tensor* t : {&store.grads(), &buffers.values()}) {
      const auto g = t->to_vector();
      results[fused].insert(results[fused].end(), g.begin(), g.end());
    }
    CHECK((fused == 1) == (net.planned_aliasing()[2] == Aliasing::Fused));
  }
  CHECK(results[0] == results[1]);
}

TEST_CASE("GlobalAvgPool and padded max pooling gradients", "[gradcheck]") {
  gradcheck(std::make_unique<GlobalAvgPool>(), Shape{3, 4, 3, 5}, 1e-2);
  // ResNet-50's stem pooling: 3x3, stride 2, padding 1 (values 0.1 apart: no near-ties).
  for (const Shape& shape : {Shape{2, 2, 8, 8}, Shape{1, 3, 7, 6}}) {
    Harness hn(std::make_unique<Pool2d>(PoolKind::Max, 3, 2, 1));
    CHECK(hn.m->output_shape(shape)[2] == (shape[2] + 2 - 3) / 2 + 1);
    Tensor x = Tensor::zeros(shape);
    Rng rng(3);
    std::vector<int64_t> order(static_cast<size_t>(x.numel()));
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
    for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 0.1f * static_cast<float>(order[static_cast<size_t>(i)]) - 5.f;
    Tensor r = random_tensor(hn.m->output_shape(shape), rng);
    Tensor dx = hn.analytic(x, r);
    check_elements(x, dx, 1e-3, [&] { return hn.loss(x, r); });
  }
}

namespace {

// A residual block whose only kink is the final ReLU (no ReLU inside the
// branch), so the check can see every kink through the block's output.
std::unique_ptr<Residual> smooth_block(int64_t in, int64_t out, int64_t stride) {
  Sequential branch;
  branch.add(std::make_unique<Conv2d>(in, out, 3, stride, 1, false));
  branch.add(std::make_unique<BatchNorm2d>(out));
  branch.add(std::make_unique<Conv2d>(out, out, 3, 1, 1, false));
  branch.add(std::make_unique<BatchNorm2d>(out));
  Sequential shortcut;
  if (stride != 1 || in != out) {
    shortcut.add(std::make_unique<Conv2d>(in, out, 1, stride, 0, false));
    shortcut.add(std::make_unique<BatchNorm2d>(out));
  }
  return std::make_unique<Residual>("block", std::move(branch), std::move(shortcut));
}

void residual_gradcheck(int64_t in, int64_t out, int64_t stride, const Shape& shape) {
  Harness hn(smooth_block(in, out, stride), 5);
  Rng rng(17);
  Tensor x = random_tensor(shape, rng);
  Tensor r = random_tensor(hn.m->output_shape(shape), rng);
  Tensor dx = hn.analytic(x, r);
  Tensor grads = Tensor::zeros(Shape{hn.store.padded_numel()});
  grads.copy_from(hn.store.grads());
  auto loss = [&] { return hn.loss(x, r); };
  auto kinks = [&] {  // which outputs the final ReLU passes
    Tensor y = Tensor::zeros(hn.m->output_shape(shape));
    Tensor xc = Tensor::zeros(shape);
    xc.copy_from(x);
    hn.m->forward(xc, y, hn.fctx);
    uint64_t h = 1469598103934665603ull;
    for (float v : y.span<float>()) h = (h ^ (v > 0.f)) * 1099511628211ull;
    return h;
  };
  int64_t skipped = 0, total = x.numel();
  // h = 3e-3: fp32 rounding of the loss stays well inside the tolerance (at
  // 1e-3 one element once came out at 2.009e-3).
  check_elements(x, dx, 3e-3, loss, kinks, &skipped);
  for (auto& p : hn.store.params()) {
    INFO("parameter " << p.name);
    check_elements(p.value, grads.slice(p.offset, p.shape), 3e-3, loss, kinks, &skipped);
    total += p.numel();
  }
  INFO(skipped << " of " << total << " elements straddled a ReLU kink");
  CHECK(skipped * 4 < total);  // measured: 29 of 270 and 4 of 428
}

}  // namespace

TEST_CASE("Residual block gradients: identity and projection shortcuts", "[gradcheck][residual]") {
  residual_gradcheck(3, 3, 1, Shape{2, 3, 4, 4});  // identity
  residual_gradcheck(2, 4, 2, Shape{3, 2, 5, 6});  // 1x1 stride-2 projection
}

TEST_CASE("Residual's fused CPU join gives the bits of the unfused order", "[residual]") {
  // The block (its last batch norm, the addition and the ReLU in one pass; the
  // masked gradient written straight into both chains) against the same
  // chains composed by hand in the plain order: branch, shortcut, add_relu;
  // ReLU mask, both chains' backward, sum of the input gradients. Two training
  // steps (running statistics move), then evaluation; both layouts.
  for (const bool projection : {false, true})
    for (const Layout layout : {Layout::NCHW, Layout::NHWC}) {
      INFO("projection=" << projection << " nhwc=" << (layout == Layout::NHWC));
      const int64_t in = projection ? 4 : 8, stride = projection ? 2 : 1;
      const Shape xs{3, in, 10, 10};
      std::vector<float> out[2];
      for (int run = 0; run < 2; ++run) {
        std::unique_ptr<Residual> block = smooth_block(in, 8, stride);
        block->set_layout(layout);
        // run 1: the chains taken out of a second, identical block and joined by hand.
        std::unique_ptr<Residual> parts = smooth_block(in, 8, stride);
        parts->set_layout(layout);
        Sequential& branch = parts->branch();
        Sequential& shortcut = parts->shortcut();
        ParameterStore store, buffers;
        if (run == 0) {
          block->declare(store, "");
          block->declare_buffers(buffers, "");
        } else {
          branch.declare(store, "branch.");
          shortcut.declare(store, "shortcut.");
          branch.declare_buffers(buffers, "branch.");
          shortcut.declare_buffers(buffers, "shortcut.");
        }
        store.finalize();
        buffers.finalize();
        Rng init(5);
        if (run == 0) {
          block->init(init);
        } else {
          branch.init(init);
          shortcut.init(init);
        }
        Rng rng(6);
        const Tensor x = random_tensor(xs, rng);
        const Shape ys = block->output_shape(xs);
        Tensor y = Tensor::zeros(ys), dx = Tensor::zeros(xs);
        auto forward = [&](bool training) {
          const ForwardContext ctx{training};
          if (run == 0) return block->forward(x, y, ctx);
          const Tensor& a = branch.forward(x, ctx);
          const Tensor& b = projection ? shortcut.forward(x, ctx) : x;
          ops::add_relu_cpu(y.numel(), a.data<float>(), b.data<float>(), y.data<float>());
        };
        auto append = [&](const Tensor& t) {
          const auto v = t.to_vector();
          out[run].insert(out[run].end(), v.begin(), v.end());
        };
        for (int step = 0; step < 2; ++step) {
          forward(true);
          Tensor dy = random_tensor(ys, rng);
          if (run == 0) {
            block->backward(x, y, dy, &dx, BackwardContext{});
          } else {
            ops::relu_backward_cpu(y.numel(), y.data<float>(), dy.data<float>(), dy.data<float>());
            branch.output_grad().copy_from(dy);
            branch.backward(BackwardContext{}, &dx);
            Tensor dxs = Tensor::zeros(xs);
            if (projection) {
              shortcut.output_grad().copy_from(dy);
              shortcut.backward(BackwardContext{}, &dxs);
            } else {
              dxs.copy_from(dy);
            }
            ops::add_inplace_cpu(dx.numel(), dxs.data<float>(), dx.data<float>());
          }
          append(y);
          append(dx);
          append(store.grads());
        }
        forward(false);
        append(y);
        append(buffers.values());
      }
      REQUIRE(out[0].size() == out[1].size());
      CHECK(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)) == 0);
    }
}

TEST_CASE("Sequential computes its input gradient on request", "[gradcheck]") {
  // Including when its first layer is a view (the gradient is then dy itself).
  for (bool view_first : {false, true}) {
    Sequential net;
    if (view_first) net.add(std::make_unique<Flatten>());
    net.add(std::make_unique<Linear>(12, 5));
    ParameterStore store;
    net.declare(store);
    store.finalize();
    Rng init(2);
    net.init(init);
    Rng rng(3);
    Tensor x = random_tensor(view_first ? Shape{2, 3, 2, 2} : Shape{2, 12}, rng);
    Tensor r = random_tensor(Shape{2, 5}, rng);
    net.forward(x, {});
    net.output_grad().copy_from(r);
    Tensor dx = Tensor::zeros(x.shape());
    net.backward({}, &dx);
    auto loss = [&] {
      const Tensor& y = net.forward(x, {});
      double l = 0;
      for (int64_t i = 0; i < y.numel(); ++i) l += static_cast<double>(y.data<float>()[i]) * r.data<float>()[i];
      return l;
    };
    check_elements(x, dx, 1e-2, loss);
  }
}

TEST_CASE("Winograd Conv2d backward reuses its forward's filter transform only while it is current", "[conv][winograd]") {
  // Conv2d's backward takes the filter transform its forward left in the
  // workspace. Each result must be bit for bit what the op gives from scratch
  // (a fresh workspace, the transform made anew) for the weights in use:
  // after a forward; again with no forward in between; after the weights
  // changed and a new forward; after they changed with no forward (each
  // backward uses up the forward's transform, so these make it anew).
  for (const int64_t k : {int64_t{3}, int64_t{5}}) {
    CAPTURE(k);
    Conv2d layer(12, 20, k, 1, k / 2);
    layer.set_conv_algorithm(ops::ConvAlgo::Winograd);
    ParameterStore store;
    layer.declare(store, "");
    store.finalize();
    Rng rng(31);
    layer.init(rng);
    const Shape xs{2, 12, 9, 10};
    Tensor x = random_tensor(xs, rng);
    const Shape ys = layer.output_shape(xs);
    Tensor dy = random_tensor(ys, rng);
    const ops::Conv2dShape s{xs[0], ys[1], ops::ConvGeometry{xs[1], xs[2], xs[3], k, k, 1, k / 2, ys[2], ys[3]}};
    // dx and dW from the op with a fresh workspace, for the weights now in the store.
    auto scratch = [&] {
      ops::Workspace ws;
      std::vector<float> dw(static_cast<size_t>(store.params()[0].value.numel())), dx(static_cast<size_t>(xs.numel()));
      auto dyc = dy.to_vector();
      ops::conv2d_winograd_backward_cpu(s, x.data<float>(), store.params()[0].value.data<float>(), nullptr, dyc.data(),
                                        dx.data(), dw.data(), nullptr, false, false, ws);
      dx.insert(dx.end(), dw.begin(), dw.end());
      return dx;
    };
    auto through_layer = [&](bool with_forward) {
      Tensor y = Tensor::zeros(ys);
      if (with_forward) layer.forward(x, y, {});
      Tensor dx = Tensor::zeros(xs), dyc = Tensor::from_vector(ys, dy.to_vector());
      layer.backward(x, y, dyc, &dx, BackwardContext{});
      auto out = dx.to_vector();
      const auto dw = store.params()[0].grad.to_vector();
      out.insert(out.end(), dw.begin(), dw.end());
      return out;
    };
    CHECK(through_layer(true) == scratch());
    CHECK(through_layer(false) == scratch());
    for (float& v : store.params()[0].value.span<float>()) v *= -1.5f;
    CHECK(through_layer(true) == scratch());
    // New weights and no forward: the previous backward used up the transform.
    for (float& v : store.params()[0].value.span<float>()) v *= 0.75f;
    CHECK(through_layer(false) == scratch());
  }
}

namespace {

// GPT-2's pre-norm residuals: x + proj(attention(qkv(ln(x)))) and
// x + fc2(gelu(fc1(ln(x)))), x [B, T, C], joined by a plain add.
std::unique_ptr<Residual> attention_residual(int64_t c, int64_t heads) {
  Sequential branch;
  branch.add(std::make_unique<LayerNorm>(c));
  branch.add(std::make_unique<Linear>(c, 3 * c));
  branch.add(std::make_unique<CausalSelfAttention>(heads));
  branch.add(std::make_unique<Linear>(c, c));
  return std::make_unique<Residual>("attention", std::move(branch), Sequential(), Residual::Join::Add);
}

std::unique_ptr<Residual> mlp_residual(int64_t c) {
  Sequential branch;
  branch.add(std::make_unique<LayerNorm>(c));
  branch.add(std::make_unique<Linear>(c, 4 * c));
  branch.add(std::make_unique<GELU>());
  branch.add(std::make_unique<Linear>(4 * c, c));
  return std::make_unique<Residual>("mlp", std::move(branch), Sequential(), Residual::Join::Add);
}

}  // namespace

TEST_CASE("GPT-2 block residuals over [B, T, C]: gradients by finite differences", "[gradcheck][transformer]") {
  // Linear on rank-3 input (the B*T rows), LayerNorm, attention and GELU
  // chained, and the add join: every input and parameter element.
  gradcheck(attention_residual(8, 2), Shape{2, 5, 8}, 1e-2);
  gradcheck(mlp_residual(6), Shape{2, 3, 6}, 1e-2);
}

TEST_CASE("Residual's add join: y = x + branch(x), nothing clipped at zero", "[transformer]") {
  std::unique_ptr<Residual> r = mlp_residual(4);
  ParameterStore store;
  r->declare(store, "b.");
  store.finalize();
  Rng rng(3);
  r->init(rng);
  CHECK(r->output_shape(Shape{2, 3, 4}) == Shape{2, 3, 4});
  CHECK_FALSE(r->backward_reads_output());
  Tensor x = random_tensor(Shape{2, 3, 4}, rng, 3.f);
  Tensor y = Tensor::zeros(Shape{2, 3, 4});
  r->forward(x, y, ForwardContext{});
  int negative = 0;
  for (float v : y.span<float>()) negative += v < 0.f;
  CHECK(negative > 0);  // an AddRelu join would have clipped these
}
