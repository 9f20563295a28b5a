// ops/disagreement.h: the measure Conv2dCuda's race uses to keep a wrong cuDNN
// engine out -- small for rounding, large for a wrong element, infinite for
// NaN or a size mismatch.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "comm/communicator.h"
#include "ops/disagreement.h"

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
