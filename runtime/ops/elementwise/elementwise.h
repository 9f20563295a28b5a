// Elementwise ops on the tensors' device: ReLU, GELU, residual additions, dropout,
// and the fp32 <-> 16-bit casts of mixed precision. Tensors are flat here
// (their numel counts; shapes are the caller's); inputs and outputs have the
// same numel, dtype and device. On the CPU fp32; on a GPU fp32, bf16 or fp16
// (bitwise the CPU op on the widened values, rounded once: elementwise_cuda.h),
// queued on the context's stream. All are safe in place (out may be in).
// Kernels: elementwise_cpu.h, elementwise_cuda.h; dispatch: elementwise.cpp.
#pragma once

#include <cstdint>

#include "ops/elementwise/dropout_hash.h"
#include "ops/exec.h"
#include "tensor/tensor.h"

namespace lockstep::ops {

// y = max(0, x).
void relu_forward(const Tensor& x, Tensor& y, const Exec& ex);
// dx = dy where y > 0, else 0.
void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx, const Exec& ex);
// y = max(0, a + b) (a residual block's join).
void add_relu(const Tensor& a, const Tensor& b, Tensor& y, const Exec& ex);
// y += x.
void add_inplace(const Tensor& x, Tensor& y, const Exec& ex);

// GELU, tanh approximation (gelu_rule.h): y = gelu(x); backward dx = dy * gelu'(x)
// from the forward's input x. On a GPU within a few ulps of the CPU.
void gelu_forward(const Tensor& x, Tensor& y, const Exec& ex);
void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx, const Exec& ex);

// Which elements inverted dropout keeps (elementwise_cpu.h, dropout_forward_cpu):
// x and y are [rows, row_len], row r being global sample row0 + r, drawn from
// `key`; channels_last > 0 for channels-last samples. On a GPU, device_key.step
// set (a captured step) draws the key on the device instead.
struct DropoutDraw {
  int64_t rows = 0, row_len = 0, row0 = 0;
  uint64_t key = 0;
  DeviceDropoutKey device_key{};
  int64_t channels_last = 0;
};
// y = x * keep / (1 - p), mask = keep (uint8, numel of x).
void dropout_forward(const Tensor& x, Tensor& y, Tensor& mask, float p, const DropoutDraw& draw, const Exec& ex);
// dx = dy * mask / (1 - p).
void dropout_backward(const Tensor& mask, float p, const Tensor& dy, Tensor& dx, const Exec& ex);

// dst = src converted between fp32 and bf16/fp16 (rounded to nearest even, or
// widened exactly): the first layer's input and the last gradient of a
// mixed-precision model. GPU tensors only (16-bit activations run on a GPU).
void cast(const Tensor& src, Tensor& dst, const Exec& ex);

// Mixed precision: the fp32 master weight `w` rounded to `dt` (bf16 or fp16)
// into `w16` (grown as needed, on w's device), queued on the context's
// stream; returns w16. Done by every forward (weights change every step);
// backward reuses it.
const Tensor& round_weight(const Tensor& w, DType dt, Tensor& w16, const Exec& ex);

}  // namespace lockstep::ops
