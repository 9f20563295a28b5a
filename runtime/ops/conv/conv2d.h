// Conv2dOp: one convolution layer's op on the tensors' device, with what it
// keeps between calls: the CPU kernels' workspace and algorithm choice, and on
// a GPU the cuDNN descriptors and algorithms for the geometry last seen and
// the 16-bit weight of mixed precision.
//   x [N, C, H, W]   w [OC, C, KH, KW] fp32 master   b [OC] fp32 (nullable)   y [N, OC, OH, OW]
// (activations in the op's layout; w keeps this order in both)
// forward: y = conv(x, w) + b, then ReLU when `relu` (fused).
// backward: with `relu`, dy is first masked by y > 0 (in place);
//   dw (+)= ..., db (+)= ... (nullable), dx = ... (nullable); `accumulate` adds to dw, db.
// CPU: fp32; NCHW picks im2col + GEMM or Winograd per shape (conv2d_choose),
// NHWC has one algorithm (conv2d_cpu.h). GPU: cuDNN (conv2d_cuda.h), fp32 or
// bf16/fp16 activations with the weight rounded to their type by each forward.
// Dispatch: conv2d.cpp.
#pragma once

#include <memory>

#include "ops/conv/conv2d_cpu.h"
#include "ops/exec.h"
#include "ops/workspace.h"
#include "tensor/layout.h"
#include "tensor/tensor.h"

namespace lockstep::ops {

class Conv2dCuda;  // ops/conv/conv2d_cuda.h (GPU builds)

class Conv2dOp {
 public:
  // Forces an algorithm on the CPU's NCHW path; Auto picks per shape.
  void set_algorithm(ConvAlgo algo) { algo_ = algo; }
  void set_layout(Layout layout) { layout_ = layout; }
  Workspace& workspace() { return ws_; }
  // Bytes kept between steps: the 16-bit weight and the Winograd filter transform.
  int64_t held_bytes() const { return static_cast<int64_t>(w16_.nbytes()) + ws_.shared_bytes(); }

  void forward(const Conv2dShape& s, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, bool relu,
               const Exec& ex);
  // After a forward on the same input geometry, type and layout.
  void backward(const Conv2dShape& s, const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& dy, Tensor* dx,
                Tensor& dw, Tensor* db, bool accumulate, bool relu, const Exec& ex);

 private:
  Layout layout_ = Layout::NCHW;
  ConvAlgo algo_ = ConvAlgo::Auto;
  Workspace ws_;
  // CPU Winograd: the last forward left its filter transform of w in ws_ and
  // nothing has used ws_ since, so the next backward reuses it (weights do not
  // change between a forward and its backward; dx is the gradient for the
  // weights that forward used). Cleared by every other forward and by backward.
  bool winograd_filters_ready_ = false;
  // GPU: cuDNN descriptors and algorithms for the input geometry last seen
  // (shared_ptr: the type is complete only in GPU builds).
  std::shared_ptr<Conv2dCuda> gpu_;
  ConvGeometry gpu_geometry_{};
  DType gpu_dtype_ = DType::F32;      // the tensor type gpu_ was made for
  Layout gpu_layout_ = Layout::NCHW;  // the layout gpu_ was made for
  Tensor w16_;  // 16-bit inputs (mixed precision): the weight rounded to their type by each forward
};

}  // namespace lockstep::ops
