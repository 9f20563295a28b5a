// ops/disagreement/disagreement.h: the measure Conv2dCuda's race uses to keep a wrong cuDNN
// engine out -- small for rounding, large for a wrong element, infinite for
// NaN or a size mismatch -- and the fp32 bound, which summation order stays
// inside and TF32 inputs do not.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "ops/disagreement/disagreement.h"

using lockstep::ops::disagreement;
using lockstep::ops::disagreement_bound_16;

TEST_CASE("disagreement: rounding to bf16 stays far inside the bound, a wrong element does not", "[disagreement]") {
  std::vector<float> ref;
  for (int i = 0; i < 1000; ++i) ref.push_back(std::sin(0.37f * static_cast<float>(i)) * 10.f);
  CHECK(disagreement(ref, ref) == 0);
  std::vector<float> rounded;
  for (float v : ref) rounded.push_back(lockstep::bf16_to_float(lockstep::float_to_bf16(v)));
  const double r = disagreement(ref, rounded);
  CHECK(r > 0);
  CHECK(r <= std::ldexp(1.0, -8));  // half a bf16 unit is at most 2^-8 of |ref_i|; rms(ref) only adds to the scale
  CHECK(r < disagreement_bound_16(true) / 8);
  // Two elements swapped (an indexing error) and one term missing.
  auto swapped = ref;
  std::swap(swapped[10], swapped[11]);
  CHECK(disagreement(ref, swapped) > disagreement_bound_16(true));
  auto missing = ref;
  missing[500] -= 0.5f * std::abs(ref[500]) + 3.f;
  CHECK(disagreement(ref, missing) > disagreement_bound_16(true));
}

TEST_CASE("disagreement: NaN, infinity, sizes and all-zero outputs", "[disagreement]") {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<float> ref{1.f, -2.f, 3.f};
  CHECK(disagreement(ref, {1.f, std::nanf(""), 3.f}) == inf);
  CHECK(disagreement(ref, {1.f, -2.f, std::numeric_limits<float>::infinity()}) == inf);
  CHECK(disagreement(ref, {1.f, -2.f}) == inf);
  CHECK(disagreement({0.f, 0.f}, {0.f, 0.f}) == 0);
  CHECK(disagreement({0.f, 0.f}, {0.f, 1e-30f}) == inf);
  CHECK(disagreement({}, {}) == 0);
  CHECK(disagreement_bound_16(false) < disagreement_bound_16(true));
}

namespace {

// x with its mantissa rounded to TF32's 10 bits (nearest even): what a tensor
// core reads of an fp32 input.
float to_tf32(float x) {
  uint32_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  u = (u + 0xFFFu + ((u >> 13) & 1u)) & ~0x1FFFu;
  std::memcpy(&x, &u, sizeof u);
  return x;
}

}  // namespace

// The fp32 bound against what it must tell apart: m dot products of k random
// terms in [-1, 1] (a convolution's outputs), summed as fp32 engines may sum
// them (sequential with fused multiply-adds, reversed, in blocks of 32) and
// with TF32 inputs.
TEST_CASE("disagreement: fp32 summation orders stay inside the fp32 bound, TF32 inputs do not", "[disagreement]") {
  for (const auto& [k, m] : std::vector<std::pair<int, int>>{{9, 4000}, {288, 2000}, {100000, 60}}) {
    CAPTURE(k);
    std::mt19937_64 gen(static_cast<uint64_t>(k));
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<float> ref, reversed, blocked, tf32;
    std::vector<float> a(static_cast<size_t>(k)), b(static_cast<size_t>(k));
    for (int j = 0; j < m; ++j) {
      for (int i = 0; i < k; ++i) {
        a[static_cast<size_t>(i)] = dist(gen);
        b[static_cast<size_t>(i)] = dist(gen);
      }
      float s = 0, r = 0, bs = 0, t = 0;
      for (int i = 0; i < k; ++i) {
        s = std::fma(a[static_cast<size_t>(i)], b[static_cast<size_t>(i)], s);
        t = std::fma(to_tf32(a[static_cast<size_t>(i)]), to_tf32(b[static_cast<size_t>(i)]), t);
      }
      for (int i = k - 1; i >= 0; --i) r += a[static_cast<size_t>(i)] * b[static_cast<size_t>(i)];
      for (int i0 = 0; i0 < k; i0 += 32) {
        float p = 0;
        for (int i = i0; i < std::min(k, i0 + 32); ++i)
          p = std::fma(a[static_cast<size_t>(i)], b[static_cast<size_t>(i)], p);
        bs += p;
      }
      ref.push_back(s);
      reversed.push_back(r);
      blocked.push_back(bs);
      tf32.push_back(t);
    }
    const double bound = lockstep::ops::disagreement_bound_f32();
    INFO("reversed " << disagreement(ref, reversed) << ", blocked " << disagreement(ref, blocked) << ", TF32 "
                     << disagreement(ref, tf32));
    CHECK(disagreement(ref, reversed) < bound / 4);
    CHECK(disagreement(ref, blocked) < bound / 4);
    CHECK(disagreement(ref, tf32) > 2 * bound);
  }
  CHECK(lockstep::ops::disagreement_bound_f32() < disagreement_bound_16(false));
}
