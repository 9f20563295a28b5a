// Pooling on the tensors' device: 2-D max and average pooling (Pool2dShape,
// ops/pool/pool2d_cpu.h: either layout, floor mode) and global average
// pooling. On the CPU fp32; on a GPU fp32, bf16 or fp16 (bitwise the CPU op on
// the widened values: pool2d_cuda.h), queued on the context's stream. argmax
// is int32, shaped like y, on the same device.
// Kernels: pool2d_cpu.h, pool2d_cuda.h; dispatch: pool.cpp.
#pragma once

#include "ops/exec.h"
#include "ops/pool/pool2d_cpu.h"
#include "tensor/tensor.h"

namespace lockstep::ops {

void maxpool2d_forward(const Pool2dShape& s, const Tensor& x, Tensor& y, Tensor& argmax, const Exec& ex);
void maxpool2d_backward(const Pool2dShape& s, const Tensor& dy, const Tensor& argmax, Tensor& dx, const Exec& ex);
void avgpool2d_forward(const Pool2dShape& s, const Tensor& x, Tensor& y, const Exec& ex);
void avgpool2d_backward(const Pool2dShape& s, const Tensor& dy, Tensor& dx, const Exec& ex);

// Global average pooling of n images of c channels and hw positions:
// x [n, c, hw] (NCHW) or [n, hw, c] (NHWC) -> y [n, c], and back.
struct GlobalPoolShape {
  int64_t n, c, hw;
  Layout layout = Layout::NCHW;
};
void global_avgpool_forward(const GlobalPoolShape& s, const Tensor& x, Tensor& y, const Exec& ex);
void global_avgpool_backward(const GlobalPoolShape& s, const Tensor& dy, Tensor& dx, const Exec& ex);

}  // namespace lockstep::ops
