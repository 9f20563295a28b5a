// ReLU, GELU and dropout kernels: branch-free loops, multiversioned for AVX2;
// GELU runs on ops/simd_math.h's vector exp8.
#include "ops/elementwise/elementwise_cpu.h"

#include <cmath>

#include "core/error.h"
#include "core/rng.h"
#include "ops/elementwise/dropout_hash.h"
#include "ops/elementwise/gelu_rule.h"
#include "ops/simd.h"
#include "ops/simd_math.h"

namespace lockstep::ops {
namespace {
constexpr int64_t kGrain = 1 << 15;  // elements per thread, at least

LS_SIMD_CLONES void relu_fwd(int64_t b, int64_t e, const float* x, float* y) {
  for (int64_t i = b; i < e; ++i) {
    const float v = x[i];
    y[i] = v > 0.f ? v : 0.f;
  }
}

LS_SIMD_CLONES void relu_bwd(int64_t b, int64_t e, const float* y, const float* dy, float* dx) {
  for (int64_t i = b; i < e; ++i) {
    const float g = dy[i];
    dx[i] = y[i] > 0.f ? g : 0.f;
  }
}

LS_SIMD_CLONES void add_relu(int64_t b, int64_t e, const float* x, const float* z, float* y) {
  for (int64_t i = b; i < e; ++i) {
    const float v = x[i] + z[i];
    y[i] = v > 0.f ? v : 0.f;
  }
}

LS_SIMD_CLONES void add_inplace(int64_t b, int64_t e, const float* x, float* y) {
  for (int64_t i = b; i < e; ++i) y[i] += x[i];
}

// GELU's rule (ops/elementwise/gelu_rule.h) on 8 lanes, through the logistic
// form of its tanh, so that neither 1 + t nor 1 - t^2 cancels where t is near
// -1 or 1: with e = exp(-2u) and s = 1 / (1 + e),
//   0.5 (1 + tanh u) = s,   1 - tanh^2 u = 4 s (1 - s),   1 - s = e s
//   gelu(x)  = x s
//   gelu'(x) = s + 2 x s (e s) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// exp8 saturates at e^88 and returns 0 below e^-87, so s stays in [0, 1] and
// no inf appears.
struct GeluParts {
  f8 s, one_minus_s;
};

LS_INLINE GeluParts gelu_parts(f8 x) {
  const f8 u = splat8(kGeluSqrt2OverPi) * (x + splat8(kGeluCubic) * x * x * x);
  const f8 e = exp8(splat8(-2.f) * u);
  const f8 s = splat8(1.f) / (splat8(1.f) + e);
  return {s, e * s};
}

LS_INLINE f8 gelu8(f8 x) { return x * gelu_parts(x).s; }

LS_INLINE f8 gelu_slope8(f8 x) {
  const GeluParts p = gelu_parts(x);
  return p.s + splat8(2.f) * x * p.s * p.one_minus_s * splat8(kGeluSqrt2OverPi) *
                   (splat8(1.f) + splat8(3.f * kGeluCubic) * x * x);
}

LS_SIMD_CLONES void gelu_fwd(int64_t b, int64_t e, const float* x, float* y) {
  int64_t i = b;
  // The last e - i < 8 elements go through the same lanes, so an element's
  // result does not depend on where a thread's range ends.
  for (; i + 8 <= e; i += 8) store8(y + i, gelu8(load8(x + i)));
  if (i < e) store_part8(y + i, gelu8(load_part8(x + i, e - i)), e - i);
}

LS_SIMD_CLONES void gelu_bwd(int64_t b, int64_t e, const float* x, const float* dy, float* dx) {
  int64_t i = b;
  for (; i + 8 <= e; i += 8) store8(dx + i, load8(dy + i) * gelu_slope8(load8(x + i)));
  if (i < e) store_part8(dx + i, load_part8(dy + i, e - i) * gelu_slope8(load_part8(x + i, e - i)), e - i);
}

// The row key is draw `row` of stream `key`, as the header documents; the hash
// shared with the GPU kernel spells rng_u64 out itself (host/device).
static_assert(dropout_row_key(0x0123456789ABCDEFull, 0) == static_cast<uint32_t>(rng_u64(0x0123456789ABCDEFull, 0)));
static_assert(dropout_row_key(0xFEDCBA9876543210ull, 1234567) ==
              static_cast<uint32_t>(rng_u64(0xFEDCBA9876543210ull, 1234567)));
static_assert(dropout_row_key(~0ull, ~0ull) == static_cast<uint32_t>(rng_u64(~0ull, ~0ull)));
static_assert(dropout_stream_key(7, 0x1234, 99) == rng_key(7, 0x1234, 99));
static_assert(dropout_stream_key(~0ull, 1, ~0ull) == rng_key(~0ull, 1, ~0ull));

LS_SIMD_CLONES void dropout_row(int64_t n, uint32_t row_key, uint32_t threshold, float scale, const float* x, float* y,
                                uint8_t* mask) {
  for (int64_t e = 0; e < n; ++e) {
    const uint32_t keep = dropout_keep(row_key, e, threshold);
    mask[e] = static_cast<uint8_t>(keep);
    y[e] = x[e] * (static_cast<float>(keep) * scale);
  }
}

// A channels-last row [positions, channels]: each element draws as its logical
// (channels-first) index.
void dropout_row_channels_last(int64_t n, int64_t channels, uint32_t row_key, uint32_t threshold, float scale,
                               const float* x, float* y, uint8_t* mask) {
  const int64_t positions = n / channels;
  for (int64_t j = 0, e = 0; j < positions; ++j)
    for (int64_t c = 0; c < channels; ++c, ++e) {
      const uint32_t keep = dropout_keep(row_key, c * positions + j, threshold);
      mask[e] = static_cast<uint8_t>(keep);
      y[e] = x[e] * (static_cast<float>(keep) * scale);
    }
}

LS_SIMD_CLONES void dropout_bwd(int64_t b, int64_t e, float scale, const uint8_t* mask, const float* dy, float* dx) {
  for (int64_t i = b; i < e; ++i) dx[i] = dy[i] * (static_cast<float>(mask[i]) * scale);
}
}  // namespace

void relu_forward_cpu(int64_t n, const float* x, float* y) {
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) { relu_fwd(b, e, x, y); });
}

void relu_backward_cpu(int64_t n, const float* y, const float* dy, float* dx) {
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) { relu_bwd(b, e, y, dy, dx); });
}

void add_relu_cpu(int64_t n, const float* a, const float* b, float* y) {
  parallel_for(n, kGrain, [&](int64_t lo, int64_t hi) { add_relu(lo, hi, a, b, y); });
}

void add_inplace_cpu(int64_t n, const float* x, float* y) {
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) { add_inplace(b, e, x, y); });
}

void gelu_forward_cpu(int64_t n, const float* x, float* y) {
  parallel_for(n, kGrain / 8, [&](int64_t b, int64_t e) { gelu_fwd(b, e, x, y); });
}

void gelu_backward_cpu(int64_t n, const float* x, const float* dy, float* dx) {
  parallel_for(n, kGrain / 8, [&](int64_t b, int64_t e) { gelu_bwd(b, e, x, dy, dx); });
}

void relu_forward_serial(int64_t n, const float* x, float* y) { relu_fwd(0, n, x, y); }
void relu_backward_serial(int64_t n, const float* y, const float* dy, float* dx) { relu_bwd(0, n, y, dy, dx); }
void add_inplace_serial(int64_t n, const float* x, float* y) { add_inplace(0, n, x, y); }

void dropout_forward_cpu(int64_t rows, int64_t row_len, int64_t row0, uint64_t key, float p, const float* x, float* y,
                         uint8_t* mask, int64_t channels_last) {
  LS_CHECK(channels_last >= 0 && (channels_last == 0 || row_len % channels_last == 0),
           "dropout: rows of {} elements do not split into {} channels", row_len, channels_last);
  const float scale = dropout_scale(p);
  const uint32_t threshold = dropout_threshold(p);
  parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(row_len, 1)), [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const uint32_t row_key = dropout_row_key(key, static_cast<uint64_t>(row0 + r));
      if (channels_last > 0)
        dropout_row_channels_last(row_len, channels_last, row_key, threshold, scale, x + r * row_len,
                                  y + r * row_len, mask + r * row_len);
      else
        dropout_row(row_len, row_key, threshold, scale, x + r * row_len, y + r * row_len, mask + r * row_len);
    }
  });
}

void dropout_backward_cpu(int64_t n, float p, const uint8_t* mask, const float* dy, float* dx) {
  const float scale = dropout_scale(p);
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) { dropout_bwd(b, e, scale, mask, dy, dx); });
}

}  // namespace lockstep::ops
