// The 16-bit wire conversions over arrays (comm/wire_convert.h) against the
// scalar conversions of comm/communicator.h, bitwise: every fp16 and bf16 bit
// pattern back to float; to the wire, every fp16 value and every midpoint
// between neighbours (ties round to even), fp16 subnormals, overflow to
// infinity, ±0, ±inf and NaN, and random floats over fp32's whole exponent
// range; lengths that leave tails after the 8-wide loops, at odd offsets.
// The scalar reference itself is pinned on hand-computed values first.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "comm/wire_convert.h"

using namespace lockstep;

namespace {

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t scalar_to(WireType w, float f) { return w == WireType::BF16 ? float_to_bf16(f) : float_to_f16(f); }
float scalar_from(WireType w, uint16_t h) { return w == WireType::BF16 ? bf16_to_float(h) : f16_to_float(h); }
bool is_nan16(WireType w, uint16_t h) {
  return w == WireType::BF16 ? (h & 0x7fff) > 0x7f80 : (h & 0x7fff) > 0x7c00;
}
const char* name(WireType w) { return w == WireType::BF16 ? "bf16" : "fp16"; }

// Inputs that probe the rounding of `w`: every value of the format, the
// midpoints between neighbours and just off them, specials, random floats.
std::vector<float> probes(WireType w) {
  std::vector<float> v;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float a = scalar_from(w, static_cast<uint16_t>(h));
    if (std::isnan(a)) continue;
    v.push_back(a);
    const float b = scalar_from(w, static_cast<uint16_t>(h + 1));
    if (!std::isfinite(a) || !std::isfinite(b) || std::signbit(a) != std::signbit(b)) continue;
    uint32_t ua, ub;
    std::memcpy(&ua, &a, 4);
    std::memcpy(&ub, &b, 4);
    if (ub <= ua) continue;
    const uint32_t mid = ua + (ub - ua) / 2;  // same exponent or the binade step: still the midpoint in bits
    for (uint32_t m : {mid - 1, mid, mid + 1}) v.push_back(bits_to_float(m));
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float f : {0.f, -0.f, inf, -inf, 65504.f, 65519.f, 65520.f, 1e10f, -1e10f, 1e-10f, 5.96e-8f, 2.98e-8f,
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()})
    v.push_back(f);
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const float f = bits_to_float(bits(rng));
    if (!std::isnan(f)) v.push_back(f);
  }
  return v;
}

}  // namespace

TEST_CASE("the scalar wire conversions round to nearest even", "[unit][wire]") {
  // fp16 has 10 fraction bits: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  CHECK(f16_to_float(float_to_f16(1.f + std::ldexp(1.f, -11))) == 1.f);
  CHECK(f16_to_float(float_to_f16(1.f + 3 * std::ldexp(1.f, -11))) == 1.f + std::ldexp(1.f, -9));
  CHECK(f16_to_float(float_to_f16(65520.f)) == std::numeric_limits<float>::infinity());
  CHECK(f16_to_float(float_to_f16(65519.f)) == 65504.f);
  CHECK(f16_to_float(float_to_f16(std::ldexp(1.f, -24))) == std::ldexp(1.f, -24));  // smallest subnormal
  CHECK(f16_to_float(float_to_f16(std::ldexp(1.f, -25))) == 0.f);                   // its half: to even (0)
  // bf16 has 7: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
  CHECK(bf16_to_float(float_to_bf16(1.f + std::ldexp(1.f, -8))) == 1.f);
  CHECK(bf16_to_float(float_to_bf16(1.f + 3 * std::ldexp(1.f, -8))) == 1.f + std::ldexp(1.f, -6));
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(f16_to_float(float_to_f16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("wire arrays convert bitwise as the scalar conversions do", "[unit][wire]") {
  for (WireType w : {WireType::F16, WireType::BF16}) {
    INFO(name(w));
    // Every bit pattern back to float.
    std::vector<uint16_t> all(0x10000);
    for (uint32_t h = 0; h < 0x10000; ++h) all[h] = static_cast<uint16_t>(h);
    std::vector<float> wide(all.size());
    wire_to_floats(all.data(), static_cast<int64_t>(all.size()), w, wide.data());
    int64_t wrong = 0;
    for (uint32_t h = 0; h < 0x10000; ++h) {
      const float ref = scalar_from(w, static_cast<uint16_t>(h));
      if (std::isnan(ref) ? !std::isnan(wide[h]) : std::memcmp(&ref, &wide[h], 4) != 0) ++wrong;
    }
    CHECK(wrong == 0);

    // Floats to the wire.
    const std::vector<float> in = probes(w);
    std::vector<uint16_t> out(in.size());
    floats_to_wire(in.data(), static_cast<int64_t>(in.size()), w, out.data());
    wrong = 0;
    for (size_t i = 0; i < in.size(); ++i)
      if (out[i] != scalar_to(w, in[i])) ++wrong;
    INFO(in.size() << " probes");
    CHECK(wrong == 0);

    // NaN stays NaN.
    const float nans[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                          bits_to_float(0x7f800001u), bits_to_float(0xffc00001u)};
    uint16_t h[4];
    floats_to_wire(nans, 4, w, h);
    for (uint16_t x : h) CHECK(is_nan16(w, x));
  }
}

TEST_CASE("wire arrays: tails and unaligned starts", "[unit][wire]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 100.f);
  std::vector<float> src(64), back(64);
  for (float& f : src) f = nd(rng);
  for (WireType w : {WireType::F16, WireType::BF16}) {
    for (int64_t off : {0, 1, 3}) {
      for (int64_t n = 0; n <= 33; ++n) {
        INFO(name(w) << " offset " << off << " n " << n);
        std::vector<uint16_t> h(64, 0xabcd);
        floats_to_wire(src.data() + off, n, w, h.data() + off);
        std::fill(back.begin(), back.end(), -1.f);
        wire_to_floats(h.data() + off, n, w, back.data() + off);
        int64_t wrong = 0, touched = 0;
        for (int64_t i = 0; i < 64; ++i) {
          const bool inside = i >= off && i < off + n;
          if (inside && (h[i] != scalar_to(w, src[i]) || back[i] != scalar_from(w, h[i]))) ++wrong;
          if (!inside && (h[i] != 0xabcd || back[i] != -1.f)) ++touched;
        }
        CHECK(wrong == 0);
        CHECK(touched == 0);
      }
    }
  }
}

TEST_CASE("round_to_wire rounds every value, across its blocks", "[unit][wire]") {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 3.f);
  for (WireType w : {WireType::F16, WireType::BF16}) {
    INFO(name(w));
    Tensor t = Tensor::zeros(Shape{5000});
    std::vector<float> ref(5000);
    for (int64_t i = 0; i < 5000; ++i) {
      t.data<float>()[i] = nd(rng);
      ref[static_cast<size_t>(i)] = scalar_from(w, scalar_to(w, t.data<float>()[i]));
    }
    round_to_wire(t, w);
    CHECK(std::memcmp(ref.data(), t.data<float>(), 5000 * sizeof(float)) == 0);
  }
  Tensor t = Tensor::zeros(Shape{3});
  t.data<float>()[0] = 0.1f;
  round_to_wire(t, WireType::F32);
  CHECK(t.data<float>()[0] == 0.1f);
}
