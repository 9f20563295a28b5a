// The optimizers' host updates. Vectorised: this file is compiled with
// -fno-math-errno (sqrt of a second moment, never negative, has no error to
// report), without which gcc keeps every sqrt scalar to set errno.
#include "ops/update/update_cpu.h"

#include "core/error.h"

namespace lockstep::ops {

void adam_update_cpu(int64_t n, float* p, const float* g, float* m, float* v, const AdamScalars& a) {
#pragma omp parallel for simd schedule(static) if (n > (1 << 18))
  for (int64_t i = 0; i < n; ++i) adam_element(p[i], g[i], m[i], v[i], a);
}

void sgd_update_cpu(int64_t n, float* p, const float* g, float* momentum_buf, float lr, float scale,
                    float weight_decay, float momentum, bool nesterov) {
  if (momentum == 0.f) {
#pragma omp parallel for simd schedule(static) if (n > (1 << 18))
    for (int64_t i = 0; i < n; ++i) sgd_element(p[i], g[i], lr, scale, weight_decay);
    return;
  }
  LS_CHECK(momentum_buf != nullptr, "sgd update: momentum {} without a buffer", momentum);
#pragma omp parallel for simd schedule(static) if (n > (1 << 18))
  for (int64_t i = 0; i < n; ++i)
    sgd_momentum_element(p[i], g[i], momentum_buf[i], lr, scale, weight_decay, momentum, nesterov);
}

}  // namespace lockstep::ops
