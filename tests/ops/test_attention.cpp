// Causal self-attention (ops/attention/attention.h, nn/attention.h) against a
// double-precision reference that materialises the whole attention matrix, as
// llm.c's attention_forward_cpu and attention_backward_cpu do: values and
// gradients over shapes (one position to three row chunks; 1, 2 and 4 heads;
// head sizes 3, 8 and 16), causality bit for bit, the same bits on 1, 2 and 3
// threads, large scores, and the memory kept between forward and backward.
// (The finite-difference check of the layer is in test_gradcheck.cpp.)
//
// Tolerances: q, k and v are standard normal, so scores are of order 1 and
// outputs, convex combinations of values, at most about 4. In fp32 each score
// is a D-term dot product, each probability an exp and a normalisation over
// up to T terms and each output a T-term sum, each off by a few ulps; errors
// are measured relative to the largest |reference| (at least 1): at most
// 2.1e-7 forward and 2.8e-7 backward over these shapes. The tolerances,
// 2e-6 and 3e-6, are 10x that, and 1e4x below what a wrong mask, scale or
// head offset gives (of order 0.1 to 1). With scores in the hundreds (the
// large-score case) a score's rounding, 1e-7 of it, is an absolute 1e-5 in
// the exponent: measured 4.2e-6 forward, 3.8e-6 backward; tolerance 5e-5.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "core/rng.h"
#include "nn/attention.h"
#include "nn/shared_scratch.h"
#include "ops/attention/attention.h"
#include "ops/attention/attention_cpu.h"
#include "threads_guard.h"

using namespace lockstep;
using lockstep::testing::ThreadsGuard;

namespace {

struct Dims {
  int64_t b, t, c, nh;
  int64_t d() const { return c / nh; }
};

Tensor random_qkv(const Dims& s, uint64_t seed, float scale = 1.f) {
  Rng rng(seed);
  Tensor t = Tensor::zeros(Shape{s.b, s.t, 3 * s.c});
  for (float& v : t.span<float>()) v = scale * rng.normal();
  return t;
}

Tensor random_like(const Shape& shape, uint64_t seed) {
  Rng rng(seed);
  Tensor t = Tensor::zeros(shape);
  for (float& v : t.span<float>()) v = rng.normal();
  return t;
}

// The reference: att [B, NH, T, T] kept whole, everything in double.
struct Reference {
  std::vector<double> y, lse, dqkv;  // lse [B, NH, T]
  double max_score = 0;
};

Reference reference(const Dims& s, const Tensor& qkv_t, const Tensor* dy_t) {
  const int64_t T = s.t, C = s.c, D = s.d(), ld = 3 * C;
  const float* qkv = qkv_t.data<float>();
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  Reference r;
  r.y.assign(static_cast<size_t>(s.b * T * C), 0.0);
  r.lse.assign(static_cast<size_t>(s.b * s.nh * T), 0.0);
  r.dqkv.assign(static_cast<size_t>(s.b * T * ld), 0.0);
  r.max_score = -1e300;
  std::vector<double> att(static_cast<size_t>(T * T));
  std::vector<double> datt(static_cast<size_t>(T * T));
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t h = 0; h < s.nh; ++h) {
      auto q = [&](int64_t t, int64_t e) { return static_cast<double>(qkv[(b * T + t) * ld + h * D + e]); };
      auto k = [&](int64_t t, int64_t e) { return static_cast<double>(qkv[(b * T + t) * ld + C + h * D + e]); };
      auto v = [&](int64_t t, int64_t e) { return static_cast<double>(qkv[(b * T + t) * ld + 2 * C + h * D + e]); };
      std::fill(att.begin(), att.end(), 0.0);
      for (int64_t t = 0; t < T; ++t) {
        double mx = -1e300;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          double dot = 0;
          for (int64_t e = 0; e < D; ++e) dot += q(t, e) * k(t2, e);
          att[t * T + t2] = dot * scale;
          mx = std::max(mx, dot * scale);
        }
        r.max_score = std::max(r.max_score, mx);
        double sum = 0;
        for (int64_t t2 = 0; t2 <= t; ++t2) sum += att[t * T + t2] = std::exp(att[t * T + t2] - mx);
        for (int64_t t2 = 0; t2 <= t; ++t2) att[t * T + t2] /= sum;
        r.lse[static_cast<size_t>((b * s.nh + h) * T + t)] = mx + std::log(sum);
        for (int64_t e = 0; e < D; ++e) {
          double acc = 0;
          for (int64_t t2 = 0; t2 <= t; ++t2) acc += att[t * T + t2] * v(t2, e);
          r.y[static_cast<size_t>((b * T + t) * C + h * D + e)] = acc;
        }
      }
      if (!dy_t) continue;
      const float* dy = dy_t->data<float>();
      auto g = [&](int64_t t, int64_t e) { return static_cast<double>(dy[(b * T + t) * C + h * D + e]); };
      auto dq = [&](int64_t t, int64_t e) -> double& { return r.dqkv[static_cast<size_t>((b * T + t) * ld + h * D + e)]; };
      auto dk = [&](int64_t t, int64_t e) -> double& {
        return r.dqkv[static_cast<size_t>((b * T + t) * ld + C + h * D + e)];
      };
      auto dv = [&](int64_t t, int64_t e) -> double& {
        return r.dqkv[static_cast<size_t>((b * T + t) * ld + 2 * C + h * D + e)];
      };
      for (int64_t t = 0; t < T; ++t) {
        double row = 0;  // sum_t2 att * datt
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          double acc = 0;
          for (int64_t e = 0; e < D; ++e) {
            acc += g(t, e) * v(t2, e);
            dv(t2, e) += att[t * T + t2] * g(t, e);
          }
          datt[t * T + t2] = acc;
          row += att[t * T + t2] * acc;
        }
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          const double ds = att[t * T + t2] * (datt[t * T + t2] - row) * scale;
          for (int64_t e = 0; e < D; ++e) {
            dq(t, e) += ds * k(t2, e);
            dk(t2, e) += ds * q(t, e);
          }
        }
      }
    }
  return r;
}

bool same_bits(const Tensor& a, const Tensor& b, int64_t n) {
  return std::memcmp(a.data<float>(), b.data<float>(), static_cast<size_t>(n) * sizeof(float)) == 0;
}

struct Run {
  Tensor y, lse, dqkv;
  int64_t held_scratch = 0;
};

// The layer's forward, and its backward when dy is given.
Run run_layer(const Dims& s, const Tensor& qkv, const Tensor* dy) {
  CausalSelfAttention m(s.nh);
  Run r;
  r.y = Tensor::zeros(m.output_shape(qkv.shape()));
  r.y.fill(-7.f);  // every element must be written
  m.forward(qkv, r.y, ForwardContext{});
  r.lse = Tensor::zeros(Shape{s.b, s.nh, s.t});  // the statistics, read through the op's own call
  ops::Workspace ws;
  Tensor y2 = Tensor::zeros(r.y.shape()), lse;
  ops::causal_attention_forward(qkv, y2, lse, s.nh, ws, ops::Exec{nullptr, "test"});
  REQUIRE(same_bits(y2, r.y, r.y.numel()));
  r.lse.copy_from(lse.slice(0, r.lse.shape()));
  if (dy) {
    r.dqkv = Tensor::zeros(qkv.shape());
    r.dqkv.fill(-7.f);
    m.backward(qkv, r.y, *dy, &r.dqkv, BackwardContext{});
  }
  r.held_scratch = m.held_memory().scratch;
  return r;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// Largest |got - want|, relative to max(1, max |want|); REQUIREs it <= tol.
double check_close(const Tensor& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.numel() == static_cast<int64_t>(want.size()));
  const double scale = std::max(1.0, max_abs(want));
  double worst = 0;
  const float* g = got.data<float>();
  for (size_t i = 0; i < want.size(); ++i) {
    REQUIRE(std::isfinite(g[i]));
    const double err = std::abs(g[i] - want[i]) / scale;
    if (err > worst) worst = err;
    INFO("element " << i << ": got " << g[i] << " want " << want[i]);
    REQUIRE(err <= tol);
  }
  return worst;
}

constexpr double kForwardTol = 2e-6;
constexpr double kBackwardTol = 3e-6;
constexpr double kLargeScoreTol = 5e-5;

}  // namespace

TEST_CASE("causal attention forward matches a double-precision reference", "[attention]") {
  for (const int64_t t : {1, 5, 17, 64, 130}) {
    for (const Dims s : {Dims{2, t, 8, 1}, Dims{2, t, 16, 2}, Dims{2, t, 64, 4}, Dims{2, t, 32, 4}, Dims{2, t, 12, 4}}) {
      INFO("B " << s.b << " T " << s.t << " C " << s.c << " heads " << s.nh);
      const Tensor qkv = random_qkv(s, 10 + static_cast<uint64_t>(t * s.c));
      const Reference ref = reference(s, qkv, nullptr);
      const Run r = run_layer(s, qkv, nullptr);
      check_close(r.y, ref.y, kForwardTol);
      check_close(r.lse.slice(0, Shape{s.b * s.nh * s.t}), ref.lse, kForwardTol);
    }
  }
}

TEST_CASE("causal attention backward matches a double-precision reference", "[attention]") {
  for (const Dims s : {Dims{2, 64, 32, 4}, Dims{2, 64, 64, 4}, Dims{2, 64, 12, 4}, Dims{2, 130, 16, 2}, Dims{1, 17, 8, 1}}) {
    INFO("B " << s.b << " T " << s.t << " C " << s.c << " heads " << s.nh);
    const Tensor qkv = random_qkv(s, 20 + static_cast<uint64_t>(s.t));
    const Tensor dy = random_like(Shape{s.b, s.t, s.c}, 21);
    const Reference ref = reference(s, qkv, &dy);
    const Run r = run_layer(s, qkv, &dy);
    check_close(r.y, ref.y, kForwardTol);
    check_close(r.dqkv, ref.dqkv, kBackwardTol);
  }
}

TEST_CASE("causal attention: an output never depends on later positions", "[attention]") {
  const Dims s{2, 150, 16, 2};  // three row chunks
  const Tensor qkv = random_qkv(s, 31);
  const Run base = run_layer(s, qkv, nullptr);
  for (const int64_t t0 : {0, 40, 63, 64, 100}) {
    INFO("positions after " << t0 << " changed");
    // Every channel (q, k and v of every head) of the later positions.
    Tensor other = random_qkv(s, 32 + static_cast<uint64_t>(t0), 3.f);
    Tensor changed = Tensor::zeros(qkv.shape());
    changed.copy_from(qkv);
    for (int64_t b = 0; b < s.b; ++b)
      for (int64_t t = t0 + 1; t < s.t; ++t)
        for (int64_t e = 0; e < 3 * s.c; ++e) {
          const int64_t i = (b * s.t + t) * 3 * s.c + e;
          changed.data<float>()[i] = other.data<float>()[i];
        }
    const Run r = run_layer(s, changed, nullptr);
    for (int64_t b = 0; b < s.b; ++b) {
      const int64_t n = (t0 + 1) * s.c;  // y[b, 0..t0]
      REQUIRE(std::memcmp(r.y.data<float>() + b * s.t * s.c, base.y.data<float>() + b * s.t * s.c,
                          static_cast<size_t>(n) * sizeof(float)) == 0);
    }
    // A loss on outputs 0..t0 only: no gradient reaches q, k or v of later positions.
    Tensor dy = random_like(Shape{s.b, s.t, s.c}, 33);
    for (int64_t b = 0; b < s.b; ++b)
      for (int64_t t = t0 + 1; t < s.t; ++t)
        for (int64_t e = 0; e < s.c; ++e) dy.data<float>()[(b * s.t + t) * s.c + e] = 0.f;
    const Run g = run_layer(s, qkv, &dy);
    int64_t nonzero_later = 0, nonzero_earlier = 0;
    for (int64_t b = 0; b < s.b; ++b)
      for (int64_t t = 0; t < s.t; ++t)
        for (int64_t e = 0; e < 3 * s.c; ++e) {
          const float v = g.dqkv.data<float>()[(b * s.t + t) * 3 * s.c + e];
          (t > t0 ? nonzero_later : nonzero_earlier) += v != 0.f;
        }
    REQUIRE(nonzero_later == 0);
    REQUIRE(nonzero_earlier > 0);
  }
}

TEST_CASE("causal attention gives the same bits on 1, 2 and 3 threads", "[attention]") {
  const Dims s{3, 70, 24, 3};  // 9 (b, h) pairs: uneven parts; two row chunks
  const Tensor qkv = random_qkv(s, 41);
  const Tensor dy = random_like(Shape{s.b, s.t, s.c}, 42);
  Run one;
  {
    ThreadsGuard guard(1);
    one = run_layer(s, qkv, &dy);
  }
  for (const int threads : {2, 3}) {
    INFO(threads << " threads");
    ThreadsGuard guard(threads);
    const Run r = run_layer(s, qkv, &dy);
    REQUIRE(same_bits(r.y, one.y, one.y.numel()));
    REQUIRE(same_bits(r.dqkv, one.dqkv, one.dqkv.numel()));
  }
}

TEST_CASE("causal attention stays finite and accurate with scores far beyond exp's fp32 range", "[attention]") {
  // q and k 8x a standard normal: scores q.k / sqrt(D) have a standard
  // deviation of 64 and reach a few hundred, where exp overflows fp32 (above
  // 88.7) without the row max subtracted. Rounding of a score s is about
  // 1e-7 |s|, which moves a probability by that much relatively (see the
  // tolerances above).
  const Dims s{1, 256, 16, 2};
  Tensor qkv = random_qkv(s, 51);
  for (int64_t t = 0; t < s.t; ++t)
    for (int64_t e = 0; e < 2 * s.c; ++e) qkv.data<float>()[t * 3 * s.c + e] *= 8.f;
  const Tensor dy = random_like(Shape{s.b, s.t, s.c}, 52);
  const Reference ref = reference(s, qkv, &dy);
  REQUIRE(ref.max_score > 200);
  const Run r = run_layer(s, qkv, &dy);
  check_close(r.y, ref.y, kLargeScoreTol);
  check_close(r.dqkv, ref.dqkv, kLargeScoreTol);
}

TEST_CASE("causal attention keeps per-row statistics and per-thread score blocks only", "[attention]") {
  ThreadsGuard guard(2);
  const Dims s{2, 150, 16, 2};
  const Tensor qkv = random_qkv(s, 61);
  const Tensor dy = random_like(Shape{s.b, s.t, s.c}, 62);
  const Run r = run_layer(s, qkv, &dy);
  // [B, NH, T] log-sum-exps, and per thread two [64, T] blocks (the backward's).
  const int64_t stats = s.b * s.nh * s.t, blocks = 2 * 2 * ops::kAttentionRowChunk * s.t;
  REQUIRE(r.held_scratch == static_cast<int64_t>(sizeof(float)) * (stats + blocks));
  REQUIRE(r.held_scratch < static_cast<int64_t>(sizeof(float)) * s.b * s.nh * s.t * s.t);
}

TEST_CASE("CausalSelfAttention on a model's shared scratch: same bits, counted once, nothing read from it", "[attention]") {
  const Dims s{2, 90, 16, 2};
  const Tensor qkv = random_qkv(s, 71);
  const Tensor dy = random_like(Shape{s.b, s.t, s.c}, 72);
  const Run own = run_layer(s, qkv, &dy);
  auto scratch = std::make_shared<SharedScratch>();
  CausalSelfAttention m(s.nh);
  m.share_scratch(scratch);
  Tensor y = Tensor::zeros(own.y.shape()), dqkv = Tensor::zeros(qkv.shape());
  // NaN in the per-thread blocks before each call: a call that read what an
  // earlier one (or another layer) left there would turn NaN.
  scratch->fill(std::numeric_limits<float>::quiet_NaN());
  m.forward(qkv, y, ForwardContext{});
  scratch->fill(std::numeric_limits<float>::quiet_NaN());
  m.backward(qkv, y, dy, &dqkv, BackwardContext{});
  REQUIRE(same_bits(y, own.y, y.numel()));
  REQUIRE(same_bits(dqkv, own.dqkv, dqkv.numel()));
  REQUIRE(m.held_memory().scratch == static_cast<int64_t>(sizeof(float)) * s.b * s.nh * s.t);
  REQUIRE(scratch->held_memory().scratch >= static_cast<int64_t>(sizeof(float)) * 2 * 64 * s.t);
}

TEST_CASE("causal attention refuses shapes that do not split into heads", "[attention]") {
  CausalSelfAttention m(4);
  REQUIRE_THROWS_WITH(m.output_shape(Shape{2, 5, 3 * 6}), Catch::Contains("[B, T, 3C]"));
  REQUIRE_THROWS_WITH(m.output_shape(Shape{2, 30}), Catch::Contains("[B, T, 3C]"));
  const Tensor qkv = Tensor::zeros(Shape{1, 3, 24});
  Tensor y = Tensor::zeros(Shape{1, 3, 4});  // C is 8
  Tensor lse;
  ops::Workspace ws;
  REQUIRE_THROWS_WITH(ops::causal_attention_forward(qkv, y, lse, 4, ws, ops::Exec{nullptr, "attn"}),
                      Catch::Contains("attn") && Catch::Contains("output"));
  REQUIRE_THROWS_WITH(ops::causal_attention_forward(qkv, y, lse, 3, ws, ops::Exec{nullptr, "attn"}),
                      Catch::Contains("8 channels do not split into 3 heads"));
}

TEST_CASE("CausalSelfAttention describes itself and counts the causal half's products", "[attention]") {
  CausalSelfAttention m(2);
  REQUIRE(m.describe() == "CausalSelfAttention(n_head=2)");
  REQUIRE(m.output_shape(Shape{3, 10, 48}) == Shape{3, 10, 16});
  REQUIRE(!m.has_parameters());
  REQUIRE(m.backward_reads_output());
  // 2 products x 2 FLOPs x B x C x T (T + 1) / 2.
  REQUIRE(m.forward_flops(Shape{3, 10, 48}) == 2 * 2 * 3 * 16 * 55);
}
