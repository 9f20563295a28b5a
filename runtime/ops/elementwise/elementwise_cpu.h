// Elementwise kernels on flat fp32 arrays (CPU): ReLU, GELU, residual additions and dropout.
// All are safe in place (out may equal in).
#pragma once

#include <cstdint>

namespace lockstep::ops {

void relu_forward_cpu(int64_t n, const float* x, float* y);
// dx = dy where y > 0, else 0.
void relu_backward_cpu(int64_t n, const float* y, const float* dy, float* dx);
// y = max(0, a + b) (a residual block's join).
void add_relu_cpu(int64_t n, const float* a, const float* b, float* y);
// y += x.
void add_inplace_cpu(int64_t n, const float* x, float* y);
// The same three on the calling thread only, for ops that call them inside
// their own parallel regions (the convolutions' per-thread chunks).
void relu_forward_serial(int64_t n, const float* x, float* y);
void relu_backward_serial(int64_t n, const float* y, const float* dy, float* dx);
void add_inplace_serial(int64_t n, const float* x, float* y);

// GELU, tanh approximation (ops/elementwise/gelu_rule.h): y = gelu(x), and
// dx = dy * gelu'(x) (backward reads the forward's input x).
void gelu_forward_cpu(int64_t n, const float* x, float* y);
void gelu_backward_cpu(int64_t n, const float* x, const float* dy, float* dx);

// Inverted dropout: keep with probability 1-p, scale kept values by 1/(1-p).
// Row r (global sample row0 + r) gets a 32-bit key from draw row0 + r of stream
// `key`; element e keeps when the top 24 bits of mix32(row key + e * golden) are
// >= ceil(p * 2^24). So a sample's mask depends only on its global index, never
// on how a batch is split, and the per-element hash vectorises.
// channels_last > 0: each row is a channels-last sample, [row_len / channels_last
// positions, channels_last channels] in memory; the element at (position j,
// channel c) draws as logical element e = c * positions + j, so an NHWC run
// drops the same logical elements as an NCHW run (same masks, reordered).
void dropout_forward_cpu(int64_t rows, int64_t row_len, int64_t row0, uint64_t key, float p, const float* x, float* y,
                         uint8_t* mask, int64_t channels_last = 0);
void dropout_backward_cpu(int64_t n, float p, const uint8_t* mask, const float* dy, float* dx);

}  // namespace lockstep::ops
