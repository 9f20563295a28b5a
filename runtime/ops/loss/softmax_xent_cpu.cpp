// Numerically stable softmax cross-entropy (max-subtracted log-sum-exp), rows
// spread over the compute threads. Each row is one pass for the maximum and one
// of vector exps (ops/simd_math.h); a row's result never depends on how many
// threads ran, and the loss is summed over rows in row order afterwards, so the
// figures are the same at any --threads.
#include "ops/loss/softmax_xent_cpu.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "ops/simd.h"
#include "ops/simd_math.h"

namespace lockstep::ops {
namespace {

constexpr int64_t kBlock = 2048;  // exps summed in fp32 lanes before each fp64 add

void check_labels(int64_t b, int64_t c, const int32_t* labels, float smoothing) {
  LS_CHECK(smoothing >= 0.f && smoothing < 1.f, "label smoothing {} outside [0, 1)", smoothing);
  for (int64_t i = 0; i < b; ++i)
    LS_CHECK(labels[i] >= 0 && labels[i] < c, "label {} of row {} outside [0, {})", labels[i], i, c);
}

// Rows per thread, at least: a row of c logits is ~c cycles of work.
int64_t min_rows(int64_t c) { return std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(c, 1)); }

LS_SIMD_CLONES float row_max(int64_t c, const float* z) { return row_max8(z, c); }

// sum_j exp(z_j - mx); with `out`, also writes the exps there.
LS_SIMD_CLONES double row_exp_sum(int64_t c, const float* z, float mx, float* out) {
  double sum = 0;
  const f8 m = splat8(mx);
  for (int64_t b = 0; b < c; b += kBlock) {
    const int64_t e = std::min(c, b + kBlock);
    f8 acc = splat8(0.f);
    int64_t j = b;
    for (; j + 8 <= e; j += 8) {
      const f8 v = exp8(load8(z + j) - m);
      if (out != nullptr) store8(out + j, v);
      acc += v;
    }
    float tail = 0;
    for (; j < e; ++j) {
      f8 one = splat8(0.f);
      one[0] = z[j] - mx;
      const float v = exp8(one)[0];
      if (out != nullptr) out[j] = v;
      tail += v;
    }
    sum += static_cast<double>(hsum8(acc)) + tail;
  }
  return sum;
}

LS_SIMD_CLONES void scale_row(int64_t c, float* d, float mul, float sub) {
  for (int64_t j = 0; j < c; ++j) d[j] = d[j] * mul - sub;
}

// The first index of the row's maximum (the argmax the scalar scan would find).
int64_t first_index_of(int64_t c, const float* z, float mx) {
  for (int64_t j = 0; j < c; ++j)
    if (z[j] == mx) return j;
  return 0;  // NaN maximum: no index equals it
}

}  // namespace

XentResult softmax_xent_forward_cpu(int64_t b, int64_t c, const float* logits, const int32_t* labels,
                                    float smoothing) {
  check_labels(b, c, labels, smoothing);
  std::vector<double> row_loss(static_cast<size_t>(b));
  std::vector<uint8_t> row_correct(static_cast<size_t>(b));
  parallel_for(b, min_rows(c), [&](int64_t rb, int64_t re) {
    for (int64_t i = rb; i < re; ++i) {
      const float* z = logits + i * c;
      const int32_t label = labels[i];
      const float mx = row_max(c, z);
      const double lse = std::log(row_exp_sum(c, z, mx, nullptr)) + mx;  // log sum_j exp(z_j)
      if (smoothing == 0.f) {
        row_loss[i] = lse - z[label];
      } else {
        // -sum_j q_j (z_j - lse) = lse - (1 - eps) z_label - (eps / C) sum_j z_j, as sum_j q_j = 1.
        double zsum = 0;
        for (int64_t j = 0; j < c; ++j) zsum += z[j];
        const double eps = smoothing;
        row_loss[i] = lse - (1.0 - eps) * z[label] - eps / static_cast<double>(c) * zsum;
      }
      row_correct[i] = first_index_of(c, z, mx) == label;
    }
  });
  XentResult r;
  for (int64_t i = 0; i < b; ++i) {
    r.loss_sum += row_loss[i];
    r.correct += row_correct[i];
  }
  return r;
}

void softmax_xent_backward_cpu(int64_t b, int64_t c, const float* logits, const int32_t* labels, float scale,
                               float* dlogits, float smoothing) {
  check_labels(b, c, labels, smoothing);
  const float off = scale * smoothing / static_cast<float>(c);  // scale * q_j off the label
  const float on = scale * (1.f - smoothing);                    // scale * (q_label - eps / C)
  parallel_for(b, min_rows(c), [&](int64_t rb, int64_t re) {
    for (int64_t i = rb; i < re; ++i) {
      const float* z = logits + i * c;
      float* d = dlogits + i * c;
      const float mx = row_max(c, z);
      const float sum = static_cast<float>(row_exp_sum(c, z, mx, d));
      scale_row(c, d, scale / sum, smoothing == 0.f ? 0.f : off);
      d[labels[i]] -= smoothing == 0.f ? scale : on;
    }
  });
}

}  // namespace lockstep::ops
