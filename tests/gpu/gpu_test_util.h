// Shared pieces of the GPU tests: a per-test GPU context, random inputs,
// host<->device copies and the parity comparison used against the CPU ops.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "tensor/tensor.h"

namespace lockstep::testing {

// One context on GPU 0 per test case (fresh stream, allocator and handles).
struct GpuFixture {
  cuda::Context ctx{0};

  // A device tensor holding `values` (F32).
  Tensor upload(const Shape& shape, const std::vector<float>& values) {
    return Tensor::from_vector(shape, values).to(ctx.allocator());
  }
  Tensor device_zeros(const Shape& shape, DType dtype = DType::F32) {
    return Tensor::zeros(shape, dtype, ctx.allocator());
  }
  // Waits for the stream, then copies back.
  std::vector<float> download(const Tensor& t) {
    ctx.synchronize();
    return t.to_vector();
  }
};

inline std::vector<float> random_vector(int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

// Largest |a - b| / max(1, |b|) over the elements (b is the CPU reference).
inline double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - b[i]) / std::max(1.0, std::abs(static_cast<double>(b[i])));
    if (!(d <= worst)) worst = d;  // NaN propagates as "worse"
  }
  return worst;
}

// REQUIREs parity within `tol` and says which comparison failed.
#define LS_REQUIRE_PARITY(gpu, cpu, tol)                                          \
  do {                                                                            \
    const double ls_diff_ = ::lockstep::testing::max_rel_diff((gpu), (cpu));      \
    INFO(#gpu " vs " #cpu ": max rel diff " << ls_diff_ << " (tolerance " << (tol) << ")"); \
    REQUIRE(ls_diff_ <= (tol));                                                   \
  } while (0)

}  // namespace lockstep::testing
