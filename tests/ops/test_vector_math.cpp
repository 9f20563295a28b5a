// The vector exp (ops/simd_math.h) and the CPU kernels built on it:
// softmax cross-entropy over a GPT-2-wide vocabulary and GELU, against
// double-precision evaluations of the same formulas, and the same bits at 1
// and 2 compute threads. The finite-difference gradient checks of these ops
// are in test_gradcheck.cpp.
//
// Tolerances:
// - exp8 within 2 ulp of libm's expf on [-87, 88] (measured 1 ulp), 0 below
//   -87, NaN for NaN.
// - cross-entropy rows of 50,304 logits N(0, 3): loss within 1e-6 relative
//   of the double reference, dlogits within 1e-9 + 2e-6 relative per element
//   (measured 3e-7 relative: fp32 exps and an fp32 product per element).
// - GELU on [-10, 10]: y within 5e-7 (1 + |y|), dx within 5e-7 (1 + |dx|) of
//   the double formulas (measured 9e-8 and 1.1e-7).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/rng.h"
#include "ops/elementwise/elementwise_cpu.h"
#include "ops/loss/softmax_xent_cpu.h"
#include "ops/simd_math.h"
#include "threads_guard.h"

using namespace lockstep;
using namespace lockstep::ops;
using lockstep::testing::ThreadsGuard;

namespace {

int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

// One lane through exp8 (the other lanes hold other values, so lanes are
// checked independently of one another too).
float exp_lane(float x) { return exp8(f8{x, x + 1.f, x - 1.f, 0.f, x, x, x, x})[4]; }

double gelu_ref(double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
double gelu_slope_ref(double x) {
  const double t = std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
}

}  // namespace

TEST_CASE("exp8 is within 2 ulp of expf and handles the range's ends", "[ops][simd_math]") {
  int64_t worst = 0;
  for (float x = -87.f; x <= 88.f; x += 0.00173f) worst = std::max(worst, ulps(exp_lane(x), std::exp(x)));
  CHECK(worst <= 2);
  CHECK(exp_lane(0.f) == 1.f);
  CHECK(exp_lane(-87.5f) == 0.f);
  CHECK(exp_lane(-1e30f) == 0.f);
  CHECK(std::isfinite(exp_lane(1e30f)));
  CHECK(std::isnan(exp_lane(std::nanf(""))));
}

TEST_CASE("softmax cross-entropy over 50304 classes matches double and is thread-count independent",
          "[ops][simd_math]") {
  const int64_t b = 6, c = 50304;  // not a multiple of the threads' split, nor of 8 in the tail test below
  Rng rng(17);
  std::vector<float> z(static_cast<size_t>(b * c));
  for (float& v : z) v = 3.f * rng.normal();
  std::vector<int32_t> labels = {0, 5, 50303, 12345, 777, 40000};
  const float scale = 1.f / static_cast<float>(b);

  // Double reference.
  double loss_ref = 0;
  std::vector<double> d_ref(z.size());
  for (int64_t i = 0; i < b; ++i) {
    const float* r = z.data() + i * c;
    double mx = r[0], sum = 0;
    for (int64_t j = 0; j < c; ++j) mx = std::max(mx, static_cast<double>(r[j]));
    for (int64_t j = 0; j < c; ++j) sum += std::exp(r[j] - mx);
    loss_ref += std::log(sum) + mx - r[labels[i]];
    for (int64_t j = 0; j < c; ++j) d_ref[i * c + j] = std::exp(r[j] - mx) / sum * scale;
    d_ref[i * c + labels[i]] -= scale;
  }

  auto run = [&](int threads, std::vector<float>& d) {
    ThreadsGuard guard(threads);
    d.assign(z.size(), 0.f);
    const XentResult r = softmax_xent_forward_cpu(b, c, z.data(), labels.data());
    softmax_xent_backward_cpu(b, c, z.data(), labels.data(), scale, d.data());
    return r;
  };
  std::vector<float> d1, d2;
  const XentResult r1 = run(1, d1), r2 = run(2, d2);
  CHECK(r1.loss_sum == Approx(loss_ref).epsilon(1e-6));
  CHECK(r1.loss_sum == r2.loss_sum);
  CHECK(r1.correct == r2.correct);
  CHECK(std::memcmp(d1.data(), d2.data(), d1.size() * sizeof(float)) == 0);
  double worst = 0;
  for (size_t k = 0; k < d1.size(); ++k)
    worst = std::max(worst, std::fabs(d1[k] - d_ref[k]) / (1e-9 + 2e-6 * std::fabs(d_ref[k])));
  CHECK(worst <= 1.0);

  // A width that is not a multiple of 8: the scalar tail agrees with the lanes.
  const int64_t c2 = 13;
  std::vector<float> z2(z.begin(), z.begin() + c2), d3(c2);
  const int32_t label2 = 4;
  const XentResult r3 = softmax_xent_forward_cpu(1, c2, z2.data(), &label2);
  softmax_xent_backward_cpu(1, c2, z2.data(), &label2, 1.f, d3.data());
  double mx = z2[0], sum = 0;
  for (float v : z2) mx = std::max(mx, static_cast<double>(v));
  for (float v : z2) sum += std::exp(v - mx);
  CHECK(r3.loss_sum == Approx(std::log(sum) + mx - z2[label2]).epsilon(1e-6));
  for (int64_t j = 0; j < c2; ++j)
    CHECK(d3[j] == Approx(std::exp(z2[j] - mx) / sum - (j == label2 ? 1.0 : 0.0)).margin(1e-6));
}

TEST_CASE("GELU's vector lanes match the double formulas and do not depend on the thread split",
          "[ops][simd_math]") {
  const int64_t n = 20001;  // odd: every thread's range ends in a partial vector
  std::vector<float> x(n), dy(n);
  Rng rng(5);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = -10.f + 20.f * static_cast<float>(i) / static_cast<float>(n - 1);
    dy[i] = rng.normal();
  }
  auto run = [&](int threads, std::vector<float>& y, std::vector<float>& dx) {
    ThreadsGuard guard(threads);
    y.assign(n, 0.f);
    dx.assign(n, 0.f);
    gelu_forward_cpu(n, x.data(), y.data());
    gelu_backward_cpu(n, x.data(), dy.data(), dx.data());
  };
  std::vector<float> y1, dx1, y2, dx2;
  run(1, y1, dx1);
  run(2, y2, dx2);
  CHECK(std::memcmp(y1.data(), y2.data(), n * sizeof(float)) == 0);
  CHECK(std::memcmp(dx1.data(), dx2.data(), n * sizeof(float)) == 0);
  double worst_y = 0, worst_dx = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double yr = gelu_ref(x[i]), dr = dy[i] * gelu_slope_ref(x[i]);
    worst_y = std::max(worst_y, std::fabs(y1[i] - yr) / (1 + std::fabs(yr)));
    worst_dx = std::max(worst_dx, std::fabs(dx1[i] - dr) / (1 + std::fabs(dr)));
  }
  CHECK(worst_y <= 5e-7);
  CHECK(worst_dx <= 5e-7);
}
