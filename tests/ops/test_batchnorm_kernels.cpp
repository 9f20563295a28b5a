// The batch-norm kernels (ops/batchnorm/batchnorm_cpu.h) against a double-precision
// reference, for planes short enough that they run along the images' rows
// (resnet50's 4x4 and 2x2 stages) and for long ones (per-plane loops): the
// two statistics, the apply passes (with and without the fused ReLU, and the
// residual join), the backward reductions (masking dy in place under the
// ReLU) and the backward apply. Channel counts make the row kernels split a
// thread's channels into several lane blocks; 1 and 2 threads must give the
// same bits. batchnorm_moments_cpu (both statistics channel by channel) gives
// the bits of the two separate passes.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "ops/batchnorm/batchnorm_cpu.h"
#include "threads_guard.h"

using namespace lockstep::ops;
using lockstep::testing::ThreadsGuard;

namespace {

struct Outputs {
  std::vector<double> sum, m2, sum_dy, sum_dy_xmu;
  std::vector<float> y, y_join, dy_masked, dx;
};

struct Inputs {
  BatchNormShape s;
  std::vector<float> x, r, dy, mean, scale, shift, a, b, d;
};

Inputs make_inputs(BatchNormShape s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  Inputs in{s, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  const size_t M = static_cast<size_t>(s.n * s.c * s.hw);
  for (auto* v : {&in.x, &in.r, &in.dy}) {
    v->resize(M);
    for (float& f : *v) f = nd(rng);
  }
  for (size_t i = 0; i < M; ++i) in.x[i] += static_cast<float>((i / static_cast<size_t>(s.hw)) % 5);  // channel offsets
  for (auto* v : {&in.mean, &in.scale, &in.shift, &in.a, &in.b, &in.d}) {
    v->resize(static_cast<size_t>(s.c));
    for (float& f : *v) f = nd(rng);
  }
  return in;
}

Outputs run(const Inputs& in, int threads) {
  ThreadsGuard guard(threads);
  const BatchNormShape& s = in.s;
  const size_t M = in.x.size(), C = static_cast<size_t>(s.c);
  Outputs o{std::vector<double>(C), std::vector<double>(C), std::vector<double>(C), std::vector<double>(C),
            std::vector<float>(M), std::vector<float>(M), in.dy, std::vector<float>(M)};
  batchnorm_sum_cpu(s, in.x.data(), o.sum.data());
  batchnorm_centered_sumsq_cpu(s, in.x.data(), in.mean.data(), o.m2.data());
  batchnorm_apply_cpu(s, in.x.data(), in.scale.data(), in.shift.data(), o.y.data(), true);
  batchnorm_apply_add_relu_cpu(s, in.x.data(), in.scale.data(), in.shift.data(), in.r.data(), o.y_join.data());
  batchnorm_backward_reduce_cpu(s, in.x.data(), o.y.data(), o.dy_masked.data(), true, in.mean.data(), o.sum_dy.data(),
                                o.sum_dy_xmu.data());
  batchnorm_backward_apply_cpu(s, in.x.data(), o.dy_masked.data(), in.a.data(), in.b.data(), in.d.data(),
                               o.dx.data());
  return o;
}

}  // namespace

TEST_CASE("batch-norm kernels against a double reference, short and long planes", "[batchnorm][kernels]") {
  for (const BatchNormShape s : {BatchNormShape{5, 300, 4}, BatchNormShape{3, 130, 9}, BatchNormShape{4, 70, 16},
                                 BatchNormShape{2, 2100, 1}, BatchNormShape{3, 6, 31}, BatchNormShape{3, 5, 40}}) {
    INFO("n " << s.n << " c " << s.c << " hw " << s.hw);
    const Inputs in = make_inputs(s, static_cast<uint32_t>(s.c * 31 + s.hw));
    const Outputs o = run(in, 1);
    int64_t wrong = 0;
    const auto at = [&](int64_t n, int64_t c, int64_t i) { return static_cast<size_t>((n * s.c + c) * s.hw + i); };
    for (int64_t c = 0; c < s.c; ++c) {
      const size_t cc = static_cast<size_t>(c);
      double sx = 0, q = 0, sg = 0, sgx = 0;
      for (int64_t n = 0; n < s.n; ++n)
        for (int64_t i = 0; i < s.hw; ++i) {
          const size_t e = at(n, c, i);
          const double x = in.x[e], y = std::max(0.0, x * in.scale[cc] + in.shift[cc]);
          const double join = std::max(0.0, x * in.scale[cc] + in.shift[cc] + in.r[e]);
          const double g = y > 0 ? in.dy[e] : 0.0;
          sx += x;
          q += (x - in.mean[cc]) * (x - in.mean[cc]);
          sg += g;
          sgx += g * (x - in.mean[cc]);
          wrong += std::abs(o.y[e] - y) > 1e-5 * (1 + std::abs(y));
          wrong += std::abs(o.y_join[e] - join) > 1e-5 * (1 + std::abs(join));
          wrong += o.dy_masked[e] != static_cast<float>(g);
          const double dx = in.a[cc] * g + in.b[cc] * x + in.d[cc];
          wrong += std::abs(o.dx[e] - dx) > 1e-5 * (1 + std::abs(dx));
        }
      const double scale = 1e-5 * static_cast<double>(s.n * s.hw);
      wrong += std::abs(o.sum[cc] - sx) > scale * (1 + std::abs(sx) / static_cast<double>(s.n * s.hw));
      wrong += std::abs(o.m2[cc] - q) > 1e-5 * (1 + q);
      wrong += std::abs(o.sum_dy[cc] - sg) > scale;
      wrong += std::abs(o.sum_dy_xmu[cc] - sgx) > scale * 4;
    }
    CHECK(wrong == 0);
    // Threads split channels: the same bits on 1 and 2 threads.
    const Outputs o2 = run(in, 2);
    CHECK(o2.sum == o.sum);
    CHECK(o2.m2 == o.m2);
    CHECK(o2.sum_dy == o.sum_dy);
    CHECK(o2.sum_dy_xmu == o.sum_dy_xmu);
    CHECK(o2.y == o.y);
    CHECK(o2.y_join == o.y_join);
    CHECK(o2.dy_masked == o.dy_masked);
    CHECK(o2.dx == o.dx);
  }
}

TEST_CASE("batch-norm moments in one pass per channel equal the two passes bitwise", "[batchnorm][kernels]") {
  // batchnorm_moments_cpu runs the same sums channel by channel (rows kernels
  // where planes are short), with mean = float(sum / count) as the layer takes
  // it; sum, mean and m2 must be the bits of sum, then centered_sumsq.
  for (const BatchNormShape s : {BatchNormShape{5, 300, 4}, BatchNormShape{3, 130, 9}, BatchNormShape{4, 70, 16},
                                 BatchNormShape{2, 2100, 1}, BatchNormShape{3, 6, 31}, BatchNormShape{3, 5, 40},
                                 BatchNormShape{2, 9, 1000}}) {
    INFO("n " << s.n << " c " << s.c << " hw " << s.hw);
    const Inputs in = make_inputs(s, static_cast<uint32_t>(s.c * 17 + s.hw));
    const size_t C = static_cast<size_t>(s.c);
    const double count = static_cast<double>(s.n * s.hw);
    for (int threads : {1, 2}) {
      ThreadsGuard guard(threads);
      std::vector<double> sum(C), m2(C), sum1(C, -1.0), m21(C, -1.0);
      std::vector<float> mean(C), mean1(C, -1.f);
      batchnorm_sum_cpu(s, in.x.data(), sum.data());
      for (size_t c = 0; c < C; ++c) mean[c] = static_cast<float>(sum[c] / count);
      batchnorm_centered_sumsq_cpu(s, in.x.data(), mean.data(), m2.data());
      batchnorm_moments_cpu(s, in.x.data(), count, sum1.data(), mean1.data(), m21.data());
      CHECK(sum1 == sum);
      CHECK(mean1 == mean);
      CHECK(m21 == m2);
      // And a centred sum, not a raw one: the channels carry offsets 0..4.
      double q = 0;
      for (int64_t n = 0; n < s.n; ++n)
        for (int64_t i = 0; i < s.hw; ++i) {
          const double d = in.x[static_cast<size_t>(n * s.c * s.hw + i)] - mean[0];
          q += d * d;
        }
      CHECK(std::abs(m21[0] - q) <= 1e-5 * (1 + q));
    }
  }
}
