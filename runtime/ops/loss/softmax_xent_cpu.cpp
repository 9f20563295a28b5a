// Numerically stable softmax cross-entropy (max-subtracted log-sum-exp).
#include "ops/loss/softmax_xent_cpu.h"

#include <cmath>

#include "core/error.h"

namespace lockstep::ops {

XentResult softmax_xent_forward_cpu(int64_t b, int64_t c, const float* logits, const int32_t* labels,
                                    float smoothing) {
  LS_CHECK(smoothing >= 0.f && smoothing < 1.f, "label smoothing {} outside [0, 1)", smoothing);
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
    if (smoothing == 0.f) {
      r.loss_sum += std::log(sum) + mx - z[label];
    } else {
      // -sum_j q_j (z_j - lse) = lse - (1 - eps) z_label - (eps / C) sum_j z_j, as sum_j q_j = 1.
      const double lse = std::log(sum) + mx;  // log sum_j exp(z_j)
      double zsum = 0;
      for (int64_t j = 0; j < c; ++j) zsum += z[j];
      const double eps = smoothing;
      r.loss_sum += lse - (1.0 - eps) * z[label] - eps / static_cast<double>(c) * zsum;
    }
    r.correct += arg == label;
  }
  return r;
}

void softmax_xent_backward_cpu(int64_t b, int64_t c, const float* logits, const int32_t* labels, float scale,
                               float* dlogits, float smoothing) {
  LS_CHECK(smoothing >= 0.f && smoothing < 1.f, "label smoothing {} outside [0, 1)", smoothing);
  const float off = scale * smoothing / static_cast<float>(c);  // scale * q_j off the label
  const float on = scale * (1.f - smoothing);                    // scale * (q_label - eps / C)
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
    if (smoothing == 0.f) {
      for (int64_t j = 0; j < c; ++j) d[j] *= inv;
      d[labels[i]] -= scale;
    } else {
      for (int64_t j = 0; j < c; ++j) d[j] = d[j] * inv - off;
      d[labels[i]] -= on;
    }
  }
}

}  // namespace lockstep::ops
