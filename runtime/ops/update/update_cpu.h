// The optimizers' host updates (ops/update/update.h): OpenMP loops over the
// elements of update_rule.h, parallel from 2^18 elements on.
#pragma once

#include <cstdint>

#include "ops/update/update_rule.h"

namespace lockstep::ops {

void adam_update_cpu(int64_t n, float* p, const float* g, float* m, float* v, const AdamScalars& a);
void sgd_update_cpu(int64_t n, float* p, const float* g, float* momentum_buf, float lr, float scale,
                    float weight_decay, float momentum, bool nesterov);

}  // namespace lockstep::ops
