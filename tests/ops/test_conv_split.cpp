// The im2col convolution's split by output channels (ops/conv/conv2d_cpu.h,
// conv2d_split_channels): layers with few output pixels per thread lower the
// whole batch into one matrix and split the GEMMs' rows between threads.
// Against a double-precision direct convolution: y (bias, fused ReLU), dW and
// db (overwritten and accumulated), dx, and dy masked in place by the ReLU;
// and against the split by images on one thread. Shapes: resnet50's small
// stages in miniature (3x3 on 2x2 with padding, 3x3 stride 2, 1x1 stride 1
// and 2).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "ops/conv/conv2d_cpu.h"
#include "threads_guard.h"

using namespace lockstep::ops;
using lockstep::testing::ThreadsGuard;

namespace {

struct Result {
  std::vector<float> y, dy, dw, db, dx;
};

Result run(const Conv2dShape& s, const std::vector<float>& x, const std::vector<float>& w,
           const std::vector<float>& b, const std::vector<float>& dy0, bool relu, bool accumulate, int threads) {
  ThreadsGuard guard(threads);
  Workspace ws;
  Result r{std::vector<float>(static_cast<size_t>(s.n * s.oc * s.g.p())), dy0,
           std::vector<float>(w.size(), accumulate ? 0.5f : -7.f), std::vector<float>(b.size(), accumulate ? 0.25f : -7.f),
           std::vector<float>(x.size(), -7.f)};
  conv2d_forward_cpu(s, x.data(), w.data(), b.data(), r.y.data(), relu, ws);
  conv2d_backward_cpu(s, x.data(), w.data(), r.y.data(), r.dy.data(), r.dx.data(), r.dw.data(), r.db.data(), accumulate,
                      relu, ws);
  return r;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float f : v) m = std::max(m, static_cast<double>(std::abs(f)));
  return m;
}

}  // namespace

TEST_CASE("conv2d split by output channels against a direct convolution", "[conv][split]") {
  struct Case {
    int64_t n, c, oc, hw, k, stride, pad;
  };
  for (const Case& k : {Case{6, 8, 12, 2, 3, 1, 1}, Case{5, 6, 10, 4, 3, 2, 1}, Case{7, 16, 9, 2, 1, 1, 0},
                        Case{4, 10, 16, 4, 1, 2, 0}}) {
    const int64_t o = (k.hw + 2 * k.pad - k.k) / k.stride + 1;
    const Conv2dShape s{k.n, k.oc, ConvGeometry{k.c, k.hw, k.hw, k.k, k.k, k.stride, k.pad, o, o}};
    REQUIRE(conv2d_split_channels(s, 2));
    REQUIRE_FALSE(conv2d_split_channels(s, 1));
    std::mt19937 rng(static_cast<uint32_t>(k.c * 100 + k.oc));
    std::normal_distribution<float> nd;
    std::vector<float> x(static_cast<size_t>(k.n * k.c * k.hw * k.hw)), w(static_cast<size_t>(k.oc * k.c * k.k * k.k)),
        b(static_cast<size_t>(k.oc)), dy(static_cast<size_t>(k.n * k.oc * o * o));
    for (auto* v : {&x, &w, &b, &dy})
      for (float& f : *v) f = nd(rng);
    for (const bool relu : {false, true}) {
      for (const bool accumulate : {false, true}) {
        INFO("n " << k.n << " c " << k.c << " oc " << k.oc << " " << k.hw << "x" << k.hw << " k " << k.k << " stride "
                  << k.stride << " relu " << relu << " accumulate " << accumulate);
        const Result split = run(s, x, w, b, dy, relu, accumulate, 2);
        // Direct convolution in double.
        std::vector<double> y(split.y.size()), dw(w.size(), accumulate ? 0.5 : 0.0), db(b.size(), accumulate ? 0.25 : 0.0),
            dx(x.size(), 0.0), g(dy.size());
        auto xi = [&](int64_t n, int64_t c, int64_t i, int64_t j) { return static_cast<size_t>(((n * k.c + c) * k.hw + i) * k.hw + j); };
        auto wi = [&](int64_t f, int64_t c, int64_t i, int64_t j) { return static_cast<size_t>(((f * k.c + c) * k.k + i) * k.k + j); };
        auto yi = [&](int64_t n, int64_t f, int64_t i, int64_t j) { return static_cast<size_t>(((n * k.oc + f) * o + i) * o + j); };
        auto taps = [&](auto&& fn) {
          for (int64_t n = 0; n < k.n; ++n)
            for (int64_t f = 0; f < k.oc; ++f)
              for (int64_t oy = 0; oy < o; ++oy)
                for (int64_t ox = 0; ox < o; ++ox)
                  for (int64_t c = 0; c < k.c; ++c)
                    for (int64_t ky = 0; ky < k.k; ++ky)
                      for (int64_t kx = 0; kx < k.k; ++kx) {
                        const int64_t iy = oy * k.stride - k.pad + ky, ix = ox * k.stride - k.pad + kx;
                        if (iy >= 0 && iy < k.hw && ix >= 0 && ix < k.hw) fn(yi(n, f, oy, ox), xi(n, c, iy, ix), wi(f, c, ky, kx));
                      }
        };
        for (size_t e = 0; e < y.size(); ++e) y[e] = b[static_cast<size_t>((e / static_cast<size_t>(o * o)) % static_cast<size_t>(k.oc))];
        taps([&](size_t ye, size_t xe, size_t we) { y[ye] += static_cast<double>(w[we]) * x[xe]; });
        for (size_t e = 0; e < y.size(); ++e) {
          if (relu) y[e] = std::max(0.0, y[e]);
          g[e] = relu && y[e] <= 0 ? 0.0 : dy[e];
          db[(e / static_cast<size_t>(o * o)) % static_cast<size_t>(k.oc)] += g[e];
        }
        taps([&](size_t ye, size_t xe, size_t we) {
          dw[we] += g[ye] * x[xe];
          dx[xe] += g[ye] * w[we];
        });
        int64_t wrong = 0;
        auto compare = [&](const std::vector<float>& got, const std::vector<double>& want) {
          double scale = 1;
          for (double v : want) scale = std::max(scale, std::abs(v));
          for (size_t i = 0; i < got.size(); ++i) wrong += std::abs(got[i] - want[i]) > 1e-5 * scale;
        };
        compare(split.y, y);
        compare(split.dy, g);
        compare(split.dw, dw);
        compare(split.db, db);
        compare(split.dx, dx);
        CHECK(wrong == 0);
        // The split by images (one thread) agrees to rounding.
        const Result images = run(s, x, w, b, dy, relu, accumulate, 1);
        double worst = 0, scale = 1;
        for (auto [a, c] : {std::pair{&split.y, &images.y}, std::pair{&split.dw, &images.dw},
                            std::pair{&split.db, &images.db}, std::pair{&split.dx, &images.dx}}) {
          scale = std::max(scale, max_abs(*c));
          for (size_t i = 0; i < a->size(); ++i) worst = std::max(worst, static_cast<double>(std::abs((*a)[i] - (*c)[i])));
        }
        CHECK(worst <= 1e-5 * scale);
      }
    }
  }
}
