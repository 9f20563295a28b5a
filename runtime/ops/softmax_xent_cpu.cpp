// Numerically stable softmax cross-entropy (max-subtracted log-sum-exp).
#include "ops/softmax_xent.h"

#include <cmath>

#include "core/error.h"

namespace lockstep::ops {

XentResult softmax_xent_forward_cpu(int64_t b, int64_t c, const float* logits, const int32_t* labels) {
  XentResult r;
  for (int64_t i = 0; i < b; ++i) {
    const float* z = logits + i * c;
    const int32_t label = labels[i];
    LS_CHECK(label >= 0 && label < c, "label {} of row {} outside [0, {})", label, i, c);
    int64_t arg = 0;
    float mx = z[0];
    for (int64_t j = 1; j < c; ++j)
      if (z[j] > mx) { mx = z[j]; arg = j; }
    double sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += std::exp(static_cast<double>(z[j] - mx));
    r.loss_sum += std::log(sum) + mx - z[label];
    r.correct += arg == label;
  }
  return r;
}

void softmax_xent_backward_cpu(int64_t b, int64_t c, const float* logits, const int32_t* labels, float scale,
                               float* dlogits) {
  for (int64_t i = 0; i < b; ++i) {
    const float* z = logits + i * c;
    float* d = dlogits + i * c;
    float mx = z[0];
    for (int64_t j = 1; j < c; ++j) mx = z[j] > mx ? z[j] : mx;
    float sum = 0;
    for (int64_t j = 0; j < c; ++j) {
      d[j] = std::exp(z[j] - mx);
      sum += d[j];
    }
    const float inv = scale / sum;
    for (int64_t j = 0; j < c; ++j) d[j] *= inv;
    d[labels[i]] -= scale;
  }
}

}  // namespace lockstep::ops
