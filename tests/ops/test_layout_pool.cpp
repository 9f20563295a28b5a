// Channels-last (NHWC) pooling and the layout transposes on the CPU.
//
// Transposes: ops/layout/layout_cpu.h against a plain index loop (element mapping) and
// round trips, bitwise, including partial 32x32 tiles and empty sizes.
// Pooling: every NHWC op (max / average forward and backward, argmax, global
// average pooling) is compared BITWISE (memcmp, tolerance 0) with the NCHW op
// on the same data transposed: the NHWC kernels evaluate each output's NCHW
// expression in the NCHW order (see ops/pool/pool2d_cpu.cpp), so nothing may differ,
// not even the sign of a zero. Inputs with many ties (values from a small set,
// -0 and +0 included) check that the first maximum in window order wins in
// both layouts; gradients of widely spread magnitudes make a different order
// of additions visible in max-pool backward with overlapping windows (3x3
// stride 1: up to 9 contributions per input). Each comparison runs on 1 and 2
// threads, and dx starts as NaN garbage (the ops must overwrite it).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu.h"
#include "core/error.h"
#include "ops/layout/layout_cpu.h"
#include "ops/pool/pool2d_cpu.h"
#include "threads_guard.h"

using namespace lockstep;
using namespace lockstep::ops;

using lockstep::testing::ThreadsGuard;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

// [n, c, hw] -> [n, hw, c] and back by plain index loops (the reference
// mapping), for any element type.
template <typename T>
std::vector<T> ref_to_nhwc(int64_t n, int64_t c, int64_t hw, const std::vector<T>& v) {
  std::vector<T> r(v.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < hw; ++i) r[static_cast<size_t>((b * hw + i) * c + ch)] = v[static_cast<size_t>((b * c + ch) * hw + i)];
  return r;
}
template <typename T>
std::vector<T> ref_to_nchw(int64_t n, int64_t c, int64_t hw, const std::vector<T>& v) {
  std::vector<T> r(v.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < hw; ++i) r[static_cast<size_t>((b * c + ch) * hw + i)] = v[static_cast<size_t>((b * hw + i) * c + ch)];
  return r;
}

// Bitwise equality (memcmp: -0 differs from +0, NaNs compare by bits).
template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Index of the first element whose bits differ (for the failure message), or -1.
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<int64_t>(i);
  return -1;
}

#define REQUIRE_SAME_BITS(a, b)                                                     \
  do {                                                                              \
    INFO(#a " vs " #b ": first difference at " << first_difference((a), (b)));      \
    REQUIRE(same_bits((a), (b)));                                                   \
  } while (0)

// Input kinds: 0 continuous in [-1, 1); 1 values from {-1, -0.5, -0, 0, 0.5, 1}
// (many ties, signed zeros among them); 2 all negative (padding, if it took
// part, would win with 0); 3 all equal (every window a tie).
std::vector<float> pool_input(int64_t n, uint64_t seed, int kind) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::uniform_int_distribution<int> pick(0, 5);
  const float set[] = {-1.f, -0.5f, -0.f, 0.f, 0.5f, 1.f};
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    if (kind == 0) x = u(gen);
    if (kind == 1) x = set[pick(gen)];
    if (kind == 2) x = -1.5f - std::abs(u(gen));
    if (kind == 3) x = 0.25f;
  }
  return v;
}

// Gradients of widely spread magnitudes (2^-20 .. 2^20) and both signs: any
// change in the order of additions changes the rounded sums.
std::vector<float> spread_gradients(int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(1.f, 2.f);
  std::uniform_int_distribution<int> e(-20, 20), sign(0, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = std::ldexp(u(gen), e(gen)) * (sign(gen) ? -1.f : 1.f);
  return v;
}

struct PoolCase {
  const char* name;
  int64_t n, c, h, w, k, stride, pad;
};

Pool2dShape shape_of(const PoolCase& p, Layout layout) {
  Pool2dShape s{p.n * p.c, p.h, p.w, p.k, p.stride, 0, 0, p.pad, layout, p.c};
  s.oh = (p.h + 2 * p.pad - p.k) / p.stride + 1;
  s.ow = (p.w + 2 * p.pad - p.k) / p.stride + 1;
  return s;
}

const PoolCase kMaxCases[] = {
    {"2x2/2 (fast path)", 2, 5, 8, 8, 2, 2, 0},
    {"2x2/2, odd sizes, c=1", 3, 1, 9, 7, 2, 2, 0},
    {"2x2/2, c=16", 2, 16, 6, 10, 2, 2, 0},
    {"3x3/2 pad 1 (resnet50 stem)", 2, 5, 15, 15, 3, 2, 1},
    {"3x3/2 pad 1, c=1, even size", 2, 1, 16, 16, 3, 2, 1},
    {"3x3/2 pad 1, c=13", 1, 13, 12, 11, 3, 2, 1},
    {"3x3/1 pad 1 (heavy overlap)", 2, 5, 10, 11, 3, 1, 1},
    {"3x3/1 pad 0, c=1", 2, 1, 7, 9, 3, 1, 0},
    {"3x3/3 non-overlapping, odd", 3, 5, 10, 10, 3, 3, 0},
    {"4x4/2 pad 2", 2, 3, 6, 7, 4, 2, 2},
    {"2x2/1 pad 1", 1, 5, 5, 5, 2, 1, 1},
    {"1x1 planes", 4, 5, 1, 1, 1, 1, 0},
};

const PoolCase kAvgCases[] = {
    {"2x2/2 (fast path)", 2, 5, 8, 8, 2, 2, 0},
    {"2x2/2, odd sizes, c=1", 3, 1, 9, 7, 2, 2, 0},
    {"2x2/2, odd sizes, c=5", 2, 5, 7, 9, 2, 2, 0},
    {"3x3/1 overlapping", 2, 5, 10, 10, 3, 1, 0},
    {"3x3/1 overlapping, c=1", 2, 1, 8, 9, 3, 1, 0},
    {"3x3/2 overlapping, leftover column", 2, 5, 7, 8, 3, 2, 0},
    {"3x3/3 non-overlapping", 3, 5, 9, 9, 3, 3, 0},
    {"7x7/1 one window", 2, 5, 7, 7, 7, 1, 0},
    {"2x2/1 c=13", 1, 13, 6, 5, 2, 1, 0},
};

}  // namespace

TEST_CASE("nchw <-> nhwc transposes map elements and round-trip bitwise", "[layout]") {
  struct T3 {
    int64_t n, c, hw;
  };
  const T3 cases[] = {{1, 1, 1},  {2, 3, 5},   {3, 64, 49}, {2, 33, 65}, {1, 1, 100},
                      {4, 100, 1}, {2, 31, 97}, {0, 3, 5},   {2, 0, 5},   {2, 3, 0}};
  uint64_t seed = 1;
  for (const T3& t : cases)
    for (int threads : {1, 2}) {
      CAPTURE(t.n, t.c, t.hw, threads);
      ThreadsGuard guard(threads);
      const int64_t count = t.n * t.c * t.hw;
      std::vector<float> src = pool_input(count, ++seed, 0);
      if (count >= 4) {  // bit patterns a float copy must keep
        src[0] = -0.f;
        src[1] = kNaN;
        src[2] = std::numeric_limits<float>::infinity();
        src[3] = std::numeric_limits<float>::denorm_min();
      }
      std::vector<float> nhwc(static_cast<size_t>(count), 7.f), back(static_cast<size_t>(count), 7.f);
      nchw_to_nhwc_cpu(t.n, t.c, t.hw, src.data(), nhwc.data());
      REQUIRE_SAME_BITS(nhwc, ref_to_nhwc(t.n, t.c, t.hw, src));
      nhwc_to_nchw_cpu(t.n, t.c, t.hw, nhwc.data(), back.data());
      REQUIRE_SAME_BITS(back, src);
      // The other direction from an NHWC source.
      std::vector<float> nchw(static_cast<size_t>(count), 7.f);
      nhwc_to_nchw_cpu(t.n, t.c, t.hw, src.data(), nchw.data());
      REQUIRE_SAME_BITS(nchw, ref_to_nchw(t.n, t.c, t.hw, src));
    }
  // One element checked by hand: [n=2, c=3, hw=4], element (b=1, ch=2, i=3).
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
  std::vector<float> y(24);
  nchw_to_nhwc_cpu(2, 3, 4, x.data(), y.data());
  CHECK(y[(1 * 4 + 3) * 3 + 2] == static_cast<float>((1 * 3 + 2) * 4 + 3));
  CHECK(y[1] == 4.f);  // (b=0, i=0, ch=1) <- (b=0, ch=1, i=0)
}

TEST_CASE("NHWC max pooling is bitwise the NCHW max pooling on transposed data", "[layout]") {
  uint64_t seed = 100;
  for (const PoolCase& p : kMaxCases)
    for (int kind = 0; kind < 4; ++kind)
      for (int threads : {1, 2}) {
        INFO(p.name);
        CAPTURE(p.n, p.c, p.h, p.w, p.k, p.stride, p.pad, kind, threads);
        ThreadsGuard guard(threads);
        const Pool2dShape sc = shape_of(p, Layout::NCHW), sn = shape_of(p, Layout::NHWC);
        const int64_t hw = p.h * p.w, ohw = sc.oh * sc.ow;
        const int64_t nx = p.n * p.c * hw, ny = p.n * p.c * ohw;
        const auto x = pool_input(nx, ++seed, kind);
        const auto dy = spread_gradients(ny, ++seed);

        // NCHW reference.
        std::vector<float> y_c(static_cast<size_t>(ny)), dx_c(static_cast<size_t>(nx), kNaN);
        std::vector<int32_t> am_c(static_cast<size_t>(ny));
        maxpool2d_forward_cpu(sc, x.data(), y_c.data(), am_c.data());
        maxpool2d_backward_cpu(sc, dy.data(), am_c.data(), dx_c.data());

        // NHWC on the transposed data.
        std::vector<float> x_n(static_cast<size_t>(nx)), dy_n(static_cast<size_t>(ny));
        nchw_to_nhwc_cpu(p.n, p.c, hw, x.data(), x_n.data());
        nchw_to_nhwc_cpu(p.n, p.c, ohw, dy.data(), dy_n.data());
        std::vector<float> y_n(static_cast<size_t>(ny), kNaN), dx_n(static_cast<size_t>(nx), kNaN);
        std::vector<int32_t> am_n(static_cast<size_t>(ny), -7);
        maxpool2d_forward_cpu(sn, x_n.data(), y_n.data(), am_n.data());
        maxpool2d_backward_cpu(sn, dy_n.data(), am_n.data(), dx_n.data());

        REQUIRE_SAME_BITS(y_n, ref_to_nhwc(p.n, p.c, ohw, y_c));
        REQUIRE(am_n == ref_to_nhwc(p.n, p.c, ohw, am_c));  // argmax: iy * w + ix, stored [N, OH, OW, C]
        REQUIRE_SAME_BITS(dx_n, ref_to_nhwc(p.n, p.c, hw, dx_c));
        if (kind == 2)
          for (float v : y_n) REQUIRE(v < -1.f);  // padding never wins
        if (kind == 3)  // all ties: the first element of each clipped window wins
          for (int64_t i = 0; i < ny; ++i) {
            const int64_t o = i / p.c % ohw, oy = o / sc.ow, ox = o % sc.ow;
            const int64_t y0 = std::max<int64_t>(oy * p.stride - p.pad, 0), x0 = std::max<int64_t>(ox * p.stride - p.pad, 0);
            REQUIRE(am_n[static_cast<size_t>(i)] == y0 * p.w + x0);
          }
      }
}

TEST_CASE("NHWC average pooling is bitwise the NCHW average pooling on transposed data", "[layout]") {
  uint64_t seed = 5000;
  for (const PoolCase& p : kAvgCases)
    for (int kind = 0; kind < 2; ++kind)
      for (int threads : {1, 2}) {
        INFO(p.name);
        CAPTURE(p.n, p.c, p.h, p.w, p.k, p.stride, kind, threads);
        ThreadsGuard guard(threads);
        const Pool2dShape sc = shape_of(p, Layout::NCHW), sn = shape_of(p, Layout::NHWC);
        const int64_t hw = p.h * p.w, ohw = sc.oh * sc.ow;
        const int64_t nx = p.n * p.c * hw, ny = p.n * p.c * ohw;
        const auto x = kind == 0 ? spread_gradients(nx, ++seed) : pool_input(nx, ++seed, 1);
        const auto dy = spread_gradients(ny, ++seed);

        std::vector<float> y_c(static_cast<size_t>(ny)), dx_c(static_cast<size_t>(nx), kNaN);
        avgpool2d_forward_cpu(sc, x.data(), y_c.data());
        avgpool2d_backward_cpu(sc, dy.data(), dx_c.data());

        std::vector<float> x_n(static_cast<size_t>(nx)), dy_n(static_cast<size_t>(ny));
        nchw_to_nhwc_cpu(p.n, p.c, hw, x.data(), x_n.data());
        nchw_to_nhwc_cpu(p.n, p.c, ohw, dy.data(), dy_n.data());
        std::vector<float> y_n(static_cast<size_t>(ny), kNaN), dx_n(static_cast<size_t>(nx), kNaN);
        avgpool2d_forward_cpu(sn, x_n.data(), y_n.data());
        avgpool2d_backward_cpu(sn, dy_n.data(), dx_n.data());

        REQUIRE_SAME_BITS(y_n, ref_to_nhwc(p.n, p.c, ohw, y_c));
        REQUIRE_SAME_BITS(dx_n, ref_to_nhwc(p.n, p.c, hw, dx_c));
      }
}

TEST_CASE("NHWC global average pooling is bitwise the NCHW global average pooling", "[layout]") {
  struct GCase {
    int64_t n, c, hw;
  };
  const GCase cases[] = {{2, 5, 49}, {3, 1, 1}, {1, 1, 7}, {2, 64, 49}, {2, 13, 3136}, {0, 4, 9}, {3, 0, 9}};
  uint64_t seed = 9000;
  for (const GCase& g : cases)
    for (int threads : {1, 2}) {
      CAPTURE(g.n, g.c, g.hw, threads);
      ThreadsGuard guard(threads);
      const int64_t nx = g.n * g.c * g.hw, ny = g.n * g.c;
      const auto x = spread_gradients(nx, ++seed), dy = spread_gradients(ny, ++seed);
      std::vector<float> y_c(static_cast<size_t>(ny)), dx_c(static_cast<size_t>(nx));
      global_avgpool_forward_cpu(ny, g.hw, x.data(), y_c.data());
      global_avgpool_backward_cpu(ny, g.hw, dy.data(), dx_c.data());

      const auto x_n = ref_to_nhwc(g.n, g.c, g.hw, x);
      std::vector<float> y_n(static_cast<size_t>(ny), kNaN), dx_n(static_cast<size_t>(nx), kNaN);
      global_avgpool_nhwc_forward_cpu(g.n, g.c, g.hw, x_n.data(), y_n.data());
      global_avgpool_nhwc_backward_cpu(g.n, g.c, g.hw, dy.data(), dx_n.data());  // dy [n, c] in both layouts
      REQUIRE_SAME_BITS(y_n, y_c);                                 // y [n, c] in both layouts
      REQUIRE_SAME_BITS(dx_n, ref_to_nhwc(g.n, g.c, g.hw, dx_c));
    }
}

TEST_CASE("NHWC pooling rejects planes that are not whole images", "[layout]") {
  PoolCase p{"bad", 1, 1, 8, 8, 2, 2, 0};
  Pool2dShape s = shape_of(p, Layout::NHWC);
  s.planes = 7;
  s.c = 2;  // 7 planes of 2 channels: not a whole number of images
  std::vector<float> buf(7 * 64, 0.f);
  std::vector<int32_t> am(7 * 16, 0);
  REQUIRE_THROWS_AS(maxpool2d_forward_cpu(s, buf.data(), buf.data(), am.data()), Error);
  REQUIRE_THROWS_AS(maxpool2d_backward_cpu(s, buf.data(), am.data(), buf.data()), Error);
  REQUIRE_THROWS_AS(avgpool2d_forward_cpu(s, buf.data(), buf.data()), Error);
  REQUIRE_THROWS_AS(avgpool2d_backward_cpu(s, buf.data(), buf.data()), Error);
  s.planes = 4;
  s.c = 0;  // no channels
  REQUIRE_THROWS_AS(maxpool2d_forward_cpu(s, buf.data(), buf.data(), am.data()), Error);
  REQUIRE_THROWS_AS(avgpool2d_backward_cpu(s, buf.data(), buf.data()), Error);
  // The same numbers are fine in NCHW, where c is unused.
  s.layout = Layout::NCHW;
  REQUIRE_NOTHROW(maxpool2d_forward_cpu(s, buf.data(), buf.data() + 4 * 64, am.data()));
  REQUIRE_THROWS_AS(global_avgpool_nhwc_forward_cpu(-1, 2, 4, buf.data(), buf.data()), Error);
}
