// The optimizers' element updates, written once for the host loops
// (update_cpu.cpp) and the GPU kernels (update_cuda.cu). Each is the fp32
// expression PyTorch's optimizers compute; nvcc contracts its multiply-adds
// to FMA, so the GPU's results may differ from the host's in the last bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace lockstep::ops {

// Adam / AdamW, t = steps + 1:
//   step_size = lr / (1 - beta1^t);  inv_sqrt_bc2 = 1 / sqrt(1 - beta2^t)
//   adam: l2 = wd, shrink = 1;  adamw: l2 = 0, shrink = 1 - lr*wd
struct AdamScalars {
  float step_size, inv_sqrt_bc2, scale, b1, b2, eps, l2, shrink;
};

// pi = p*shrink;  gi = scale*g + l2*pi;  m = b1*m + (1-b1)*gi;
// v = b2*v + (1-b2)*gi^2;  p = pi - step_size * m / (sqrt(v)*inv_sqrt_bc2 + eps)
LS_HOST_DEVICE inline void adam_element(float& p, float g, float& m, float& v, const AdamScalars& a) {
  const float pi = p * a.shrink;
  const float gi = a.scale * g + a.l2 * pi;
  const float mi = a.b1 * m + (1.f - a.b1) * gi;
  const float vi = a.b2 * v + (1.f - a.b2) * gi * gi;
  m = mi;
  v = vi;
  p = pi - a.step_size * mi / (sqrtf(vi) * a.inv_sqrt_bc2 + a.eps);
}

// SGD as torch.optim.SGD (dampening 0), gradient = scale * g, no momentum:
//   p -= lr * (scale*g + wd*p)
LS_HOST_DEVICE inline void sgd_element(float& p, float g, float lr, float scale, float wd) {
  p -= lr * (scale * g + wd * p);
}

// With momentum m: gi = scale*g + wd*p;  buf = m*buf + gi;
//   p -= lr * (nesterov ? gi + m*buf : buf)
LS_HOST_DEVICE inline void sgd_momentum_element(float& p, float g, float& buf, float lr, float scale, float wd,
                                                float m, bool nesterov) {
  const float gi = scale * g + wd * p;
  const float b = m * buf + gi;
  buf = b;
  p -= lr * (nesterov ? gi + m * b : b);
}

}  // namespace lockstep::ops
