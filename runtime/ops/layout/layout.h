// Activation layout changes (tensor/layout.h), on the tensors' device.
// Kernels: layout_cpu.h (fp32), layout_cuda.h (fp32, bf16, fp16); the
// dispatch is layout.cpp.
#pragma once

#include "ops/exec.h"
#include "tensor/layout.h"
#include "tensor/tensor.h"

namespace lockstep::ops {

// dst = src reordered from layout `from` to layout `to`. src's shape is the
// logical [N, C, H, W]; dst has the same numel, dtype and device (any shape).
// On the CPU fp32 only; on a GPU fp32, bf16 or fp16, queued on the context's
// stream. from == to is a plain copy. src and dst must not overlap (unless
// from == to).
void reorder_layout(const Tensor& src, Layout from, Layout to, Tensor& dst, const Exec& ex);

}  // namespace lockstep::ops
