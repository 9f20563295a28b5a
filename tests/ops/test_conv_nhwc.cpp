// Channels-last conv2d (ops/conv/conv2d_nhwc_cpu.cpp) against the NCHW im2col path
// (conv2d_forward_cpu / conv2d_backward_cpu), which the gradient checks cover.
// Each case draws x [N, H, W, C], dy [N, OH, OW, OC] and the canonical w, b;
// the NCHW path gets the same tensors transposed with nhwc_to_nchw_cpu and its
// y, dy, dx are transposed back to compare.
//
// Tolerance: |nhwc - nchw| <= 1e-4 * max(1, |nchw|). Both paths form the same
// products but sum them in another order (K ordered (kh, kw, c) against
// (c, kh, kw); dW/db summed over other chunks and thread partials), so they
// agree only to fp32 rounding: the worst measured here is 1.2e-5 (dw, sums of
// a few hundred products), and an indexing error shows as O(1).
// Exact comparisons: the ReLU-masked dy (a selection, no arithmetic; both paths
// get the same y to mask with); y and dx on 1 against 2 threads where the chunk
// partition does not change with the thread count; repeated runs on one count.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "core/cpu.h"
#include "core/rng.h"
#include "ops/conv/conv2d_cpu.h"
#include "ops/layout/layout_cpu.h"
#include "threads_guard.h"

using namespace lockstep;
using namespace lockstep::ops;

using lockstep::testing::ThreadsGuard;

namespace {

constexpr double kTol = 1e-4;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Case {
  const char* name;
  int64_t n, c, h, w, oc, kh, kw, stride, pad;
};

// Chunks hold ceil(128 / (OH*OW)) images (fewer for large im2col buffers), so
// the small-output cases with N > that run several chunks per thread, uneven
// last chunks and, on 2 threads, unequal ranges.
const Case kCases[] = {
    {"1x1 stride 1 pad 0 (no im2col)", 13, 8, 6, 5, 12, 1, 1, 1, 0},
    {"1x1 stride 1 pad 0, batch 1", 1, 5, 3, 3, 7, 1, 1, 1, 0},
    {"3x3 pad 1, odd H/W", 5, 16, 9, 11, 8, 3, 3, 1, 1},
    {"3x3 pad 0, 16x16 (one image per chunk)", 3, 32, 16, 16, 16, 3, 3, 1, 0},
    {"5x5 pad 2, C=3", 3, 3, 8, 8, 5, 5, 5, 1, 2},
    {"3x3 stride 2 pad 1", 13, 4, 10, 9, 6, 3, 3, 2, 1},
    {"7x7 stride 2 pad 3, C=3", 3, 3, 15, 13, 8, 7, 7, 2, 3},
    {"1x1 stride 2", 5, 6, 7, 9, 4, 1, 1, 2, 0},
    {"3x3 pad 1, C=1, batch 1", 1, 1, 7, 5, 3, 3, 3, 1, 1},
    {"1x3 pad 1 (whole windows in the padding rows)", 4, 5, 3, 6, 4, 1, 3, 1, 1},
};

Conv2dShape shape_of(const Case& k) {
  ConvGeometry g{k.c, k.h, k.w, k.kh, k.kw, k.stride, k.pad, 0, 0};
  g.oh = (k.h + 2 * k.pad - k.kh) / k.stride + 1;
  g.ow = (k.w + 2 * k.pad - k.kw) / k.stride + 1;
  return Conv2dShape{k.n, k.oc, g};
}

std::vector<float> randn(int64_t n, Rng& rng, float scale = 1.f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = scale * rng.normal();
  return v;
}

std::vector<float> to_nchw(int64_t n, int64_t c, int64_t hw, const std::vector<float>& v) {
  std::vector<float> out(v.size());
  nhwc_to_nchw_cpu(n, c, hw, v.data(), out.data());
  return out;
}

std::vector<float> to_nhwc(int64_t n, int64_t c, int64_t hw, const std::vector<float>& v) {
  std::vector<float> out(v.size());
  nchw_to_nhwc_cpu(n, c, hw, v.data(), out.data());
  return out;
}

// Number of elements outside the tolerance (NaN counts: a buffer the op should
// have overwritten still holds its NaN fill); reports the first one.
size_t mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(static_cast<double>(got[i]) - want[i]);
    if (!(d <= kTol * std::max(1.0, std::abs(static_cast<double>(want[i]))))) {
      if (bad == 0) UNSCOPED_INFO("first mismatch at " << i << ": got " << got[i] << ", want " << want[i]);
      ++bad;
    }
  }
  return bad;
}

struct Options {
  bool relu = false;
  bool accumulate = false;
  bool bias = true;   // b non-null
  bool with_db = true;
  bool with_dx = true;
};

struct Result {
  std::vector<float> y, dy, dx, dw, db;  // NHWC y, dy (masked), dx; canonical dw, db
};

struct Inputs {
  std::vector<float> x, w, b, dy, dw0, db0;
};

Inputs draw(const Conv2dShape& s, uint64_t seed) {
  const ConvGeometry& g = s.g;
  Rng rng(rng_key(seed, 0xc0));
  Inputs in;
  in.x = randn(s.n * g.h * g.w * g.c, rng);
  in.w = randn(s.oc * g.k(), rng, 1.f / std::sqrt(static_cast<float>(g.k())));
  in.b = randn(s.oc, rng);
  in.dy = randn(s.n * g.p() * s.oc, rng);
  in.dw0 = randn(s.oc * g.k(), rng);
  in.db0 = randn(s.oc, rng);
  return in;
}

// Forward, then backward with dy, in the NHWC op. Outputs the op should
// overwrite start as NaN; with accumulate, dw/db start from in.dw0/db0.
Result run_nhwc(const Conv2dShape& s, const Inputs& in, const Options& o, Workspace& ws) {
  Result r;
  r.y.assign(in.dy.size(), kNaN);
  conv2d_nhwc_forward_cpu(s, in.x.data(), in.w.data(), o.bias ? in.b.data() : nullptr, r.y.data(), o.relu, ws);
  r.dy = in.dy;
  r.dx.assign(in.x.size(), kNaN);
  r.dw = o.accumulate ? in.dw0 : std::vector<float>(in.w.size(), kNaN);
  r.db = o.accumulate ? in.db0 : std::vector<float>(in.b.size(), kNaN);
  conv2d_nhwc_backward_cpu(s, in.x.data(), in.w.data(), r.y.data(), r.dy.data(), o.with_dx ? r.dx.data() : nullptr,
                           r.dw.data(), o.with_db ? r.db.data() : nullptr, o.accumulate, o.relu, ws);
  return r;
}

// The same through the NCHW path, results in NHWC. Backward masks with the
// NHWC op's y (`y_nhwc`) so both masks agree even where y rounds near zero.
Result run_nchw(const Conv2dShape& s, const Inputs& in, const Options& o, const std::vector<float>& y_nhwc) {
  const ConvGeometry& g = s.g;
  const int64_t hw = g.h * g.w, P = g.p();
  Workspace ws;
  const std::vector<float> x = to_nchw(s.n, g.c, hw, in.x);
  std::vector<float> y(in.dy.size(), kNaN);
  conv2d_forward_cpu(s, x.data(), in.w.data(), o.bias ? in.b.data() : nullptr, y.data(), o.relu, ws);
  std::vector<float> dy = to_nchw(s.n, s.oc, P, in.dy);
  const std::vector<float> ymask = to_nchw(s.n, s.oc, P, y_nhwc);
  std::vector<float> dx(in.x.size(), kNaN);
  Result r;
  r.dw = o.accumulate ? in.dw0 : std::vector<float>(in.w.size(), kNaN);
  r.db = o.accumulate ? in.db0 : std::vector<float>(in.b.size(), kNaN);
  conv2d_backward_cpu(s, x.data(), in.w.data(), ymask.data(), dy.data(), o.with_dx ? dx.data() : nullptr,
                      r.dw.data(), o.with_db ? r.db.data() : nullptr, o.accumulate, o.relu, ws);
  r.y = to_nhwc(s.n, s.oc, P, y);
  r.dy = to_nhwc(s.n, s.oc, P, dy);
  r.dx = to_nhwc(s.n, g.c, hw, dx);
  return r;
}

void compare(const Case& k, const Options& o, int threads, Workspace& ws, uint64_t seed) {
  INFO(k.name << ": N=" << k.n << " C=" << k.c << " " << k.h << "x" << k.w << " OC=" << k.oc << " kernel "
                << k.kh << "x" << k.kw << " stride " << k.stride << " pad " << k.pad << " relu=" << o.relu
                << " accumulate=" << o.accumulate << " b=" << o.bias << " db=" << o.with_db << " dx=" << o.with_dx
                << " threads=" << threads);
  const Conv2dShape s = shape_of(k);
  const Inputs in = draw(s, seed);
  ThreadsGuard guard(threads);
  const Result got = run_nhwc(s, in, o, ws);
  const Result want = run_nchw(s, in, o, got.y);
  CHECK(mismatches(got.y, want.y) == 0);
  CHECK(mismatches(got.dw, want.dw) == 0);
  if (o.with_db) CHECK(mismatches(got.db, want.db) == 0);
  if (o.with_dx) CHECK(mismatches(got.dx, want.dx) == 0);
  if (o.relu) {
    CHECK(got.dy == want.dy);  // masked in place, identically
    size_t masked = 0;
    for (size_t i = 0; i < got.y.size(); ++i) masked += got.y[i] <= 0.f;
    CHECK(masked > 0);  // the mask did something to compare
  } else {
    CHECK(got.dy == in.dy);  // untouched without relu
  }
}

}  // namespace

TEST_CASE("NHWC conv2d matches the NCHW im2col path", "[conv_nhwc]") {
  Workspace ws;  // one workspace for every shape: buffers grow and are reused
  uint64_t seed = 1;
  for (int threads : {1, 2})
    for (const Case& k : kCases)
      for (bool relu : {false, true}) {
        Options o;
        o.relu = relu;
        compare(k, o, threads, ws, seed++);
      }
}

TEST_CASE("NHWC conv2d accumulates into dw and db", "[conv_nhwc]") {
  Workspace ws;
  uint64_t seed = 100;
  for (int threads : {1, 2})
    for (const Case& k : kCases) {
      Options o;
      o.accumulate = true;
      o.relu = (seed & 1) != 0;
      compare(k, o, threads, ws, seed);
      // And explicitly: accumulated = start + a fresh (overwriting) run's gradients.
      INFO(k.name << " threads=" << threads);
      const Conv2dShape s = shape_of(k);
      const Inputs in = draw(s, seed);
      ThreadsGuard guard(threads);
      const Result acc = run_nhwc(s, in, o, ws);
      Options fresh_o = o;
      fresh_o.accumulate = false;
      const Result fresh = run_nhwc(s, in, fresh_o, ws);
      std::vector<float> dw_sum(in.dw0.size()), db_sum(in.db0.size());
      for (size_t i = 0; i < dw_sum.size(); ++i) dw_sum[i] = in.dw0[i] + fresh.dw[i];
      for (size_t i = 0; i < db_sum.size(); ++i) db_sum[i] = in.db0[i] + fresh.db[i];
      CHECK(mismatches(acc.dw, dw_sum) == 0);
      CHECK(mismatches(acc.db, db_sum) == 0);
      CHECK(acc.dw != fresh.dw);
      ++seed;
    }
}

TEST_CASE("NHWC conv2d with null b, db and dx", "[conv_nhwc]") {
  Workspace ws;
  uint64_t seed = 200;
  for (int threads : {1, 2})
    for (const Case& k : kCases)
      for (int variant = 0; variant < 3; ++variant) {
        // 0: no bias (b and db null); 1: dx null, with relu; 2: b, db and dx all null.
        Options o;
        o.bias = o.with_db = variant == 1;
        o.with_dx = variant == 0;
        o.relu = variant == 1;
        compare(k, o, threads, ws, seed++);
      }
}

TEST_CASE("NHWC conv2d on 1 and 2 threads: same results, deterministic backward", "[conv_nhwc]") {
  // Each image's y and dx come from one thread, but the batch split moves chunk
  // boundaries, and OpenBLAS's rounding of a row depends on the GEMM's size and
  // the row's place in it (measured: Zen kernels, OpenBLAS 0.3.x). So y and dx
  // agree to the tolerance in general, and bitwise where every chunk is one image
  // on any thread count: OH*OW >= 128 rows, the chunk rule's minimum GEMM height.
  // dw/db add thread partials: bitwise only for a given thread count.
  const Case one_image_chunks[] = {
      {"3x3 pad 0, 16x16", 3, 32, 16, 16, 16, 3, 3, 1, 0},
      {"3x3 pad 1, 14x14", 4, 16, 14, 14, 16, 3, 3, 1, 1},
      {"1x1 pointwise, 12x12", 5, 8, 12, 12, 12, 1, 1, 1, 0},
  };
  uint64_t seed = 300;
  for (bool bitwise : {false, true})
    for (const Case& k : bitwise ? std::span<const Case>(one_image_chunks) : std::span<const Case>(kCases)) {
      INFO(k.name << (bitwise ? " (one image per chunk)" : ""));
      const Conv2dShape s = shape_of(k);
      const Inputs in = draw(s, seed++);
      Options o;
      o.relu = true;
      Workspace ws1, ws2;
      Result one, two, again;
      {
        ThreadsGuard guard(1);
        one = run_nhwc(s, in, o, ws1);
      }
      {
        ThreadsGuard guard(2);
        two = run_nhwc(s, in, o, ws2);
        again = run_nhwc(s, in, o, ws2);
      }
      if (bitwise) {
        CHECK(one.y == two.y);
        CHECK(one.dx == two.dx);
      } else {
        CHECK(mismatches(two.y, one.y) == 0);
        CHECK(mismatches(two.dx, one.dx) == 0);
      }
      CHECK(mismatches(two.dw, one.dw) == 0);
      CHECK(mismatches(two.db, one.db) == 0);
      CHECK(again.y == two.y);
      CHECK(again.dx == two.dx);
      CHECK(again.dw == two.dw);
      CHECK(again.db == two.db);
    }
}

TEST_CASE("NHWC conv2d with an empty batch", "[conv_nhwc]") {
  // No image: forward writes nothing, backward still overwrites (or keeps, with
  // accumulate) dw and db, as the NCHW path does.
  Conv2dShape s = shape_of(kCases[2]);
  s.n = 0;
  const Inputs in = draw(s, 400);
  for (bool accumulate : {false, true}) {
    INFO("accumulate=" << accumulate);
    Workspace ws;
    std::vector<float> dw = in.dw0, db = in.db0;
    conv2d_nhwc_backward_cpu(s, nullptr, in.w.data(), nullptr, nullptr, nullptr, dw.data(), db.data(), accumulate,
                             true, ws);
    CHECK(dw == (accumulate ? in.dw0 : std::vector<float>(dw.size(), 0.f)));
    CHECK(db == (accumulate ? in.db0 : std::vector<float>(db.size(), 0.f)));
  }
}
