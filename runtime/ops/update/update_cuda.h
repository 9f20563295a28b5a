// Optimizer updates on the GPU: one fused pass over a range of the flat
// parameter, gradient and state buffers (nn/parameter_store.h), the twins of
// Sgd::update and Adam::update. The caller computes the scalars exactly as the
// CPU optimizer does (lr, Adam's bias corrections, decay or not for this range)
// and passes pointers already offset to the range's first element. Each element
// gets the CPU formula in fp32; nvcc contracts multiply-adds to FMA, so results
// differ from the CPU's in the last bits. Both queue their work on `stream` and
// return (asynchronous); every pointer is device memory; n may be 0.
//
// `amp` (nullable): the device step state (optim/step_rule.h: fp16's
// loss scale, or a captured step's scalars), read by the kernel: when
// amp->skip is set the kernel changes nothing (a step whose gradients held
// inf/NaN); otherwise amp->grad_factor replaces `scale`, amp->lr replaces
// `lr`, and for Adam amp->step_size and amp->inv_sqrt_bc2 replace the host's
// (the bias corrections of the applied-step count, which the host does not
// know) and shrink becomes 1 - amp->lr * decoupled_wd (AdamW's weight decay
// for this range, 0 otherwise).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/update/update_rule.h"
#include "optim/step_rule.h"

namespace lockstep::ops {

// SGD as torch.optim.SGD (dampening 0), gradient = scale * g:
//   momentum == 0:  p -= lr * (scale*g + wd*p)
//   otherwise:      gi = scale*g + wd*p;  buf = momentum*buf + gi;
//                   p -= lr * (nesterov ? gi + momentum*buf : buf)
//   p, g, momentum_buf [n]; momentum_buf may be null when momentum == 0
void sgd_update_cuda(int64_t n, float* p, const float* g, float* momentum_buf, float lr, float scale,
                     float weight_decay, float momentum, bool nesterov, const StepState* amp,
                     cudaStream_t stream);

// Adam / AdamW as Adam::update (update_rule.h's adam_element), gradient =
// a.scale * g.   p, g, m, v [n]
void adam_update_cuda(int64_t n, float* p, const float* g, float* m, float* v, const AdamScalars& a,
                      float decoupled_wd, const StepState* amp, cudaStream_t stream);

}  // namespace lockstep::ops
