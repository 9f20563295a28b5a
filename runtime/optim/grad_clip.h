// Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_ (L2):
// after the gradients are averaged over ranks (and, in fp16, unscaled), the
// norm of the whole flat gradient is taken and, when it exceeds max_norm,
// every gradient is multiplied by max_norm / (norm + 1e-6).
//
// Every rank holds the same averaged gradients and sums their squares in the
// same fixed order, so every rank finds the same norm without a collective
// and the replicas stay bitwise identical. The factor is folded into the
// optimizer's gradient factor (Optimizer::step's grad_scale; on the GPU the
// step state's grad_factor): clipping costs one read of the gradients and no
// write.
//
// The host function here; the GPU's sum is ops/update/step_rule_cuda.h's and the
// rule that applies it on the device optim/step_rule.h's.
#pragma once

#include <math.h>

#include <cstdint>

#include "core/host_device.h"

namespace lockstep {

// PyTorch's epsilon in clip_grad_norm_.
constexpr float kClipEpsilon = 1e-6f;

// The factor that brings a gradient of L2 norm `norm` to at most `max_norm`:
// max_norm / (norm + 1e-6) when that is below 1, else 1. A non-finite norm
// (some gradient is inf or NaN) gives 1: the inf/NaN reaches the update as it
// would without clipping (fp16 skips the step; in fp32 the loss check stops
// the run), instead of being turned into zeros.
LS_HOST_DEVICE inline float clip_coefficient(float norm, float max_norm) {
  if (!isfinite(norm)) return 1.f;
  const float coef = max_norm / (norm + kClipEpsilon);
  return coef < 1.f ? coef : 1.f;
}

// Sum of g[i]^2 over [0, n) in double, in a fixed order whatever the thread
// count: blocks of 65,536 elements, each summed over 8 interleaved lanes
// (lane j takes i = j mod 8) that are then added in lane order, and the
// blocks' sums added in block order. Blocks run in parallel on the compute threads.
double sum_of_squares_cpu(const float* g, int64_t n);

}  // namespace lockstep
