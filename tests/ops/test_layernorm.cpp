// LayerNorm (ops/layernorm/layernorm.h, nn/layernorm.h): forward and backward
// against a double-precision evaluation of the same formulas, rows whose mean
// is large next to their spread, the same bits at any thread count, gradient
// accumulation, and the layer around the op. The finite-difference gradient
// check is in test_gradcheck.cpp.
//
// Tolerances (fp32 kernels against double references):
// - ordinary rows (values N(0, 1), weight N(1, 0.5), bias N(0, 0.5)):
//   |y - y_ref| <= 2e-6 (1 + |y_ref|) (measured up to 2e-7); gradients
//   |g - g_ref| <= 1e-5 (1 + max |g_ref|) over the tensor (measured up to
//   1.3e-7; float sums of up to 768 terms).
// - rows 1000 + U(-1, 1): the float mean is within half an ulp of 1000
//   (3.05e-5), which rstd (about 1.73) carries into y: 5.3e-5 at most, so
//   |y - y_ref| <= 1e-4 (measured 5.2e-5). A float sum of the row (llm.c's)
//   is 2e-3 off at C = 768 and fails this; the kernel sums the mean in
//   double. dweight carries the same error summed over the rows: 2e-4
//   (measured 3.3e-5 scaled).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/rng.h"
#include "nn/layernorm.h"
#include "ops/layernorm/layernorm.h"
#include "threads_guard.h"

using namespace lockstep;
using lockstep::testing::ThreadsGuard;

namespace {

constexpr float kEps = 1e-5f;

Tensor filled(const Shape& s, Rng& rng, float offset, float scale) {
  Tensor t = Tensor::zeros(s);
  for (float& v : t.span<float>()) v = offset + scale * rng.normal();
  return t;
}

// What one forward and backward of the op leave.
struct Run {
  std::vector<float> y, mean, rstd, dx, dw, db;
};

Run run_op(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& dy) {
  const int64_t n = x.size(0), c = x.size(1);
  Tensor y = Tensor::zeros(x.shape()), mean = Tensor::zeros(Shape{n}), rstd = Tensor::zeros(Shape{n});
  Tensor dx = Tensor::zeros(x.shape()), dw = Tensor::zeros(Shape{c}), db = Tensor::zeros(Shape{c});
  const ops::Exec ex{nullptr, "test"};
  ops::layernorm_forward(x, w, b, kEps, y, mean, rstd, ex);
  ops::layernorm_backward(x, w, mean, rstd, dy, &dx, dw, db, false, ex);
  return {y.to_vector(), mean.to_vector(), rstd.to_vector(), dx.to_vector(), dw.to_vector(), db.to_vector()};
}

// The same formulas in double from the same fp32 inputs.
struct Reference {
  std::vector<double> y, mean, rstd, dx, dw, db;
};

Reference reference(const Tensor& xt, const Tensor& wt, const Tensor& bt, const Tensor& dyt) {
  const int64_t n = xt.size(0), c = xt.size(1);
  const float *x = xt.data<float>(), *w = wt.data<float>(), *b = bt.data<float>(), *dy = dyt.data<float>();
  Reference r;
  r.y.resize(static_cast<size_t>(n * c));
  r.dx.resize(r.y.size());
  r.mean.resize(static_cast<size_t>(n));
  r.rstd.resize(static_cast<size_t>(n));
  r.dw.assign(static_cast<size_t>(c), 0.0);
  r.db.assign(static_cast<size_t>(c), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const float* xr = x + i * c;
    const float* gr = dy + i * c;
    double m = 0, v = 0;
    for (int64_t j = 0; j < c; ++j) m += xr[j];
    m /= static_cast<double>(c);
    for (int64_t j = 0; j < c; ++j) v += (xr[j] - m) * (xr[j] - m);
    v /= static_cast<double>(c);
    const double s = 1.0 / std::sqrt(v + kEps);
    r.mean[static_cast<size_t>(i)] = m;
    r.rstd[static_cast<size_t>(i)] = s;
    double dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int64_t j = 0; j < c; ++j) {
      const double norm = (xr[j] - m) * s;
      r.y[static_cast<size_t>(i * c + j)] = norm * w[j] + b[j];
      r.db[static_cast<size_t>(j)] += gr[j];
      r.dw[static_cast<size_t>(j)] += norm * gr[j];
      dnorm_mean += static_cast<double>(w[j]) * gr[j];
      dnorm_norm_mean += static_cast<double>(w[j]) * gr[j] * norm;
    }
    dnorm_mean /= static_cast<double>(c);
    dnorm_norm_mean /= static_cast<double>(c);
    for (int64_t j = 0; j < c; ++j) {
      const double norm = (xr[j] - m) * s;
      r.dx[static_cast<size_t>(i * c + j)] =
          (static_cast<double>(w[j]) * gr[j] - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  }
  return r;
}

double largest(const std::vector<double>& v) {
  double m = 0;
  for (double e : v) m = std::max(m, std::abs(e));
  return m;
}

void require_close(const char* what, const std::vector<float>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  const double scale = 1 + largest(want);
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(what << " element " << i << ": " << got[i] << " against " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= tol * scale);
  }
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("LayerNorm forward and backward match a double-precision reference", "[layernorm]") {
  // C below, at and above the 16 lanes (with and without the 8-wide remainder) and the 32-column
  // blocks, and not a multiple of either.
  for (const auto& [n, c] : {std::pair<int64_t, int64_t>{3, 5}, {4, 16}, {2, 37}, {7, 64}, {5, 203}, {3, 768}}) {
    INFO("x [" << n << ", " << c << "]");
    Rng rng(static_cast<uint64_t>(n * 1000 + c));
    const Tensor x = filled(Shape{n, c}, rng, 0.f, 1.f);
    const Tensor w = filled(Shape{c}, rng, 1.f, 0.5f), b = filled(Shape{c}, rng, 0.f, 0.5f);
    const Tensor dy = filled(Shape{n, c}, rng, 0.f, 1.f);
    const Run got = run_op(x, w, b, dy);
    const Reference want = reference(x, w, b, dy);
    for (size_t i = 0; i < got.y.size(); ++i) {
      INFO("y element " << i << ": " << got.y[i] << " against " << want.y[i]);
      REQUIRE(std::abs(got.y[i] - want.y[i]) <= 2e-6 * (1 + std::abs(want.y[i])));
    }
    for (int64_t i = 0; i < n; ++i) {
      REQUIRE(got.mean[static_cast<size_t>(i)] == Approx(want.mean[static_cast<size_t>(i)]).margin(1e-6));
      REQUIRE(got.rstd[static_cast<size_t>(i)] == Approx(want.rstd[static_cast<size_t>(i)]).epsilon(1e-5));
    }
    require_close("dx", got.dx, want.dx, 1e-5);
    require_close("dweight", got.dw, want.dw, 1e-5);
    require_close("dbias", got.db, want.db, 1e-5);
  }
}

TEST_CASE("LayerNorm keeps its precision on rows with a large mean", "[layernorm]") {
  // Values 1000 +- 1: E[x^2] - mean^2 would cancel to nothing in float; the
  // mean of a float sum is off by 1e-3 of the spread.
  for (const int64_t c : {int64_t{100}, int64_t{768}, int64_t{1600}}) {
    INFO("C = " << c);
    const int64_t n = 6;
    Rng rng(static_cast<uint64_t>(c));
    Tensor x = Tensor::zeros(Shape{n, c});
    for (float& v : x.span<float>()) v = 1000.f + rng.uniform(-1.f, 1.f);
    Tensor w = Tensor::zeros(Shape{c}), b = Tensor::zeros(Shape{c});
    w.fill(1.f);
    const Tensor dy = filled(Shape{n, c}, rng, 0.f, 1.f);
    const Run got = run_op(x, w, b, dy);
    const Reference want = reference(x, w, b, dy);
    double worst = 0;
    for (size_t i = 0; i < got.y.size(); ++i) worst = std::max(worst, std::abs(got.y[i] - want.y[i]));
    INFO("largest |y - y_ref| " << worst);
    REQUIRE(worst <= 1e-4);
    for (int64_t i = 0; i < n; ++i)
      REQUIRE(got.rstd[static_cast<size_t>(i)] == Approx(want.rstd[static_cast<size_t>(i)]).epsilon(1e-4));
    require_close("dx", got.dx, want.dx, 1e-4);
    require_close("dweight", got.dw, want.dw, 2e-4);
  }
}

TEST_CASE("LayerNorm gives the same bits at any thread count", "[layernorm]") {
  // Large enough that 2 and 3 threads split both the rows and the column blocks.
  for (const auto& [n, c] : {std::pair<int64_t, int64_t>{512, 203}, {96, 768}, {2048, 24}}) {
    INFO("x [" << n << ", " << c << "]");
    Rng rng(7);
    const Tensor x = filled(Shape{n, c}, rng, 0.5f, 2.f);
    const Tensor w = filled(Shape{c}, rng, 1.f, 0.5f), b = filled(Shape{c}, rng, 0.f, 0.5f);
    const Tensor dy = filled(Shape{n, c}, rng, 0.f, 1.f);
    Run one;
    {
      ThreadsGuard guard(1);
      one = run_op(x, w, b, dy);
    }
    for (int threads : {2, 3}) {
      INFO(threads << " threads");
      ThreadsGuard guard(threads);
      const Run many = run_op(x, w, b, dy);
      CHECK(same_bits(one.y, many.y));
      CHECK(same_bits(one.mean, many.mean));
      CHECK(same_bits(one.rstd, many.rstd));
      CHECK(same_bits(one.dx, many.dx));
      CHECK(same_bits(one.dw, many.dw));
      CHECK(same_bits(one.db, many.db));
    }
  }
}

TEST_CASE("LayerNorm backward accumulates: old gradient plus the fresh one", "[layernorm]") {
  const int64_t n = 9, c = 45;
  Rng rng(11);
  const Tensor x = filled(Shape{n, c}, rng, 0.f, 1.f);
  const Tensor w = filled(Shape{c}, rng, 1.f, 0.5f), b = filled(Shape{c}, rng, 0.f, 0.5f);
  const Tensor dy = filled(Shape{n, c}, rng, 0.f, 1.f);
  const Run fresh = run_op(x, w, b, dy);
  const ops::Exec ex{nullptr, "test"};
  Tensor y = Tensor::zeros(x.shape()), mean = Tensor::zeros(Shape{n}), rstd = Tensor::zeros(Shape{n});
  ops::layernorm_forward(x, w, b, kEps, y, mean, rstd, ex);
  Tensor dw = filled(Shape{c}, rng, 0.f, 1.f), db = filled(Shape{c}, rng, 0.f, 1.f);
  const std::vector<float> old_dw = dw.to_vector(), old_db = db.to_vector();
  ops::layernorm_backward(x, w, mean, rstd, dy, nullptr, dw, db, true, ex);  // no dx wanted
  for (int64_t j = 0; j < c; ++j) {
    const auto k = static_cast<size_t>(j);
    REQUIRE(dw.data<float>()[j] == old_dw[k] + fresh.dw[k]);
    REQUIRE(db.data<float>()[j] == old_db[k] + fresh.db[k]);
  }
  // Overwriting ignores what was there.
  dw.fill(123.f);
  db.fill(-7.f);
  ops::layernorm_backward(x, w, mean, rstd, dy, nullptr, dw, db, false, ex);
  CHECK(same_bits(dw.to_vector(), fresh.dw));
  CHECK(same_bits(db.to_vector(), fresh.db));
}

TEST_CASE("LayerNorm layer: parameters, rows of any rank, its statistics as scratch", "[layernorm]") {
  const int64_t b = 2, t = 3, c = 21;
  LayerNorm ln(c);
  CHECK(ln.describe() == "LayerNorm(21)");
  ParameterStore store;
  ln.declare(store, "ln.");
  store.finalize();
  Rng rng(5);
  ln.init(rng);
  REQUIRE(store.params().size() == 2);
  CHECK(store.params()[0].name == "ln.weight");
  CHECK(store.params()[1].name == "ln.bias");
  CHECK_FALSE(store.params()[0].decay);
  CHECK_FALSE(store.params()[1].decay);
  for (float v : store.params()[0].value.to_vector()) REQUIRE(v == 1.f);
  for (float v : store.params()[1].value.to_vector()) REQUIRE(v == 0.f);
  CHECK(ln.held_memory().scratch == 0);

  // Random affine parameters, then [B, T, C] through the layer against [B*T, C] through the op.
  for (float& v : store.params()[0].value.span<float>()) v = 1.f + 0.5f * rng.normal();
  for (float& v : store.params()[1].value.span<float>()) v = 0.5f * rng.normal();
  const Tensor x = filled(Shape{b, t, c}, rng, 0.f, 1.f), dy = filled(Shape{b, t, c}, rng, 0.f, 1.f);
  REQUIRE(ln.output_shape(x.shape()) == x.shape());
  Tensor y = Tensor::zeros(x.shape()), dx = Tensor::zeros(x.shape());
  ln.forward(x, y, ForwardContext{});
  CHECK(ln.held_memory().scratch == 2 * b * t * static_cast<int64_t>(sizeof(float)));
  ln.backward(x, y, dy, &dx, BackwardContext{false});
  const Run op = run_op(x.reshape(Shape{b * t, c}), store.params()[0].value, store.params()[1].value,
                        dy.reshape(Shape{b * t, c}));
  CHECK(same_bits(y.to_vector(), op.y));
  CHECK(same_bits(dx.to_vector(), op.dx));
  CHECK(same_bits(store.params()[0].grad.to_vector(), op.dw));
  CHECK(same_bits(store.params()[1].grad.to_vector(), op.db));
  ln.backward(x, y, dy, nullptr, BackwardContext{false});  // no input gradient wanted

  CHECK_THROWS_AS(ln.output_shape(Shape{b, t, c + 1}), Error);
  CHECK_THROWS_AS(ln.output_shape(Shape{c}), Error);
}
