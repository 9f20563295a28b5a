// The GPU side of the step rule (optim/step_rule.h): the check of the
// averaged gradients (loss scaling, clipping) and the once-per-step rule, both queued on `stream`
// (asynchronous; pointers are device memory).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "optim/step_rule.h"

namespace lockstep {

// Sets state->found_nonfinite to 1 if any of g[0, n) is inf or NaN (leaves it
// alone otherwise, so several ranges can be checked before one step).  g [n] fp32
void flag_nonfinite_cuda(int64_t n, const float* g, StepState* state, cudaStream_t stream);

// Clipping: state->grad_sumsq = sum of g[0, n)^2 in double, in a fixed order
// (kSumsqBlocks blocks of cuda threads, each a grid-stride loop and a tree,
// then a tree over the blocks' sums), the same on every GPU for the same g.
// partials: kSumsqBlocks doubles of device scratch.  g [n] fp32
constexpr int kSumsqBlocks = 512;
void grad_sumsq_cuda(int64_t n, const float* g, double* partials, StepState* state, cudaStream_t stream);

// One thread runs step_rule(*state, config, lr, base_factor, beta1, beta2),
// with lr = *lr_dev when lr_dev (device memory) is given (a captured step).
void device_step_rule_cuda(StepState* state, const StepConfig& config, float lr, const float* lr_dev,
                          float base_factor, float beta1, float beta2, cudaStream_t stream);

}  // namespace lockstep
