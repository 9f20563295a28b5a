// Shared pieces of the GPU tests: a per-test GPU context, random inputs,
// host<->device copies and the parity comparison used against the CPU ops.
#pragma once

#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "cuda/check.h"
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

// 16-bit values (DType::BF16 or F16) as raw bits, rounded to nearest even
// (comm/communicator.h's conversions, which the CPU wire path uses), and back.
inline uint16_t to_16(DType dt, float f) {
  REQUIRE((dt == DType::BF16 || dt == DType::F16));
  return dt == DType::BF16 ? float_to_bf16(f) : float_to_f16(f);
}
inline float from_16(DType dt, uint16_t h) { return dt == DType::BF16 ? bf16_to_float(h) : f16_to_float(h); }
inline std::vector<uint16_t> bits_16(DType dt, const std::vector<float>& v) {
  std::vector<uint16_t> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = to_16(dt, v[i]);
  return r;
}
inline std::vector<float> values_16(DType dt, const std::vector<uint16_t>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = from_16(dt, v[i]);
  return r;
}
// `v` rounded to dt and back: what a 16-bit store of an fp32 result holds.
inline std::vector<float> rounded_16(DType dt, const std::vector<float>& v) { return values_16(dt, bits_16(dt, v)); }
// Half an ulp relative to the rounded value: 2^-8 for bf16 (8 significant
// bits), 2^-11 for fp16 (11), for normal numbers.
inline int half_ulp_exponent(DType dt) { return dt == DType::BF16 ? -8 : -11; }

// A dt device tensor holding `bits` / the bits of a 16-bit device tensor
// (synchronous: waits for f's stream and the device).
inline Tensor upload_16(GpuFixture& f, DType dt, const std::vector<uint16_t>& bits) {
  Tensor t = f.device_zeros(Shape{static_cast<int64_t>(bits.size())}, dt);
  f.ctx.synchronize();  // the allocator zero-fills on the context's stream
  LS_CUDA_CHECK(cudaMemcpy(t.raw_data(), bits.data(), t.nbytes(), cudaMemcpyHostToDevice));
  LS_CUDA_CHECK(cudaDeviceSynchronize());
  return t;
}
inline std::vector<uint16_t> download_16(GpuFixture& f, const Tensor& t) {
  REQUIRE(size_of(t.dtype()) == 2);
  f.ctx.synchronize();
  std::vector<uint16_t> bits(static_cast<size_t>(t.numel()));
  LS_CUDA_CHECK(cudaMemcpy(bits.data(), t.raw_data(), t.nbytes(), cudaMemcpyDeviceToHost));
  return bits;
}

// Largest (|gpu - cpu| - 2^e |gpu|) / max(1, |cpu|), e = half_ulp_exponent(dt):
// how far 16-bit results `gpu` are from fp32 results `cpu` beyond the rounding
// to dt (half an ulp, at most 2^e of the rounded value, for normal numbers).
inline double max_excess_over_16bit_rounding(DType dt, const std::vector<float>& gpu, const std::vector<float>& cpu) {
  REQUIRE(gpu.size() == cpu.size());
  const int e = half_ulp_exponent(dt);
  double worst = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    const double g = gpu[i], c = cpu[i];
    const double d = (std::abs(g - c) - std::ldexp(std::abs(g), e)) / std::max(1.0, std::abs(c));
    if (!(d <= worst)) worst = d;  // NaN propagates as "worse"
  }
  return worst;
}

// Host reorders of [n, c, hw] <-> [n, hw, c] for any element type (floats or 16-bit bit patterns).
template <typename T>
inline std::vector<T> reorder(const std::vector<T>& v, int64_t n, int64_t c, int64_t hw, bool to_nhwc) {
  std::vector<T> out(v.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p) {
        const int64_t nchw = (i * c + ch) * hw + p, nhwc = (i * hw + p) * c + ch;
        out[static_cast<size_t>(to_nhwc ? nhwc : nchw)] = v[static_cast<size_t>(to_nhwc ? nchw : nhwc)];
      }
  return out;
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
