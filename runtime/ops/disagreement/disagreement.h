// How far one kernel's output is from another's for the same computation, on
// a scale that rounding and summation order stay well inside but a wrong
// kernel (an indexing error, a missing term) does not:
//   max_i |got_i - ref_i| / (|ref_i| + rms(ref))
// rms(ref) stands in for the size of the partial sums an output is made of:
// an engine that rounds its partial sums to a 16-bit type errs by a few of
// their half-units (up to 2^-8 of each in bf16, 2^-11 in fp16), which this scale
// keeps small even where the sum cancels to near zero. A NaN or inf in `got`
// where `ref` is finite, or different sizes, give infinity.
// Header-only and free of CUDA: nvcc and the CPU unit tests both compile it.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

namespace lockstep::ops {

inline double disagreement(const std::vector<float>& ref, const std::vector<float>& got) {
  const double inf = std::numeric_limits<double>::infinity();
  if (ref.size() != got.size()) return inf;
  double sq = 0;
  for (float r : ref) sq += static_cast<double>(r) * r;
  const double rms = ref.empty() ? 0 : std::sqrt(sq / static_cast<double>(ref.size()));
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double diff = std::abs(static_cast<double>(got[i]) - ref[i]);
    const double scale = std::abs(static_cast<double>(ref[i])) + rms;
    const double d = scale > 0 ? diff / scale : (diff == 0 ? 0 : inf);
    if (!(d <= worst)) worst = std::isnan(d) ? inf : d;
  }
  return worst;
}

// The most a 16-bit convolution gradient from one cuDNN engine may disagree
// with another's before one of them is taken to be wrong: 2^-4 in bf16, 2^-7
// in fp16 (sixteen times the most one rounding of the output can move a
// value, 2^-8 or 2^-11 of it; rounding the output happens on each side).
inline double disagreement_bound_16(bool bf16) { return bf16 ? 0.0625 : 0.0078125; }

// The same for an fp32 convolution: 2^-13 (1.2e-4). Engines that sum in fp32
// differ only in summation order: 1.2e-5 or less on this measure for sums of
// up to 100k products, sequential, reversed or blocked
// (tests/unit/test_disagreement.cpp). An engine that rounds its inputs to
// TF32's 10-bit mantissa, as tensor cores do for fp32, was 4.3e-4 to 1.1e-3
// on the same sums (the largest of 60 to 4000 outputs): 3.5 to 9 times the
// bound.
inline double disagreement_bound_f32() { return 1.0 / 8192; }

}  // namespace lockstep::ops
