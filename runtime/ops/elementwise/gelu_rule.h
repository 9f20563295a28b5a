// GELU with the tanh approximation (GPT-2's; PyTorch's approximate="tanh"),
// one definition for the host loops and the GPU kernels:
//   u = sqrt(2/pi) * (x + 0.044715 x^3),  t = tanh(u)
//   gelu(x)  = 0.5 x (1 + t)
//   gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// In fp32. The GPU kernels evaluate these with CUDA's tanhf; the CPU loops
// (ops/elementwise/elementwise_cpu.cpp) evaluate the same function in its
// logistic form with a vector exp. Host and GPU agree to a few ulps, not
// bitwise.
#pragma once

#include <cmath>

#include "core/host_device.h"

namespace lockstep::ops {

inline constexpr float kGeluSqrt2OverPi = 0.7978845608028654f;
inline constexpr float kGeluCubic = 0.044715f;

LS_HOST_DEVICE inline float gelu_value(float x) {
  const float t = tanhf(kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x));
  return 0.5f * x * (1.f + t);
}

// d gelu / dx at x.
LS_HOST_DEVICE inline float gelu_slope(float x) {
  const float x2 = x * x;
  const float t = tanhf(kGeluSqrt2OverPi * (x + kGeluCubic * x2 * x));
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kGeluSqrt2OverPi * (1.f + 3.f * kGeluCubic * x2);
}

}  // namespace lockstep::ops
