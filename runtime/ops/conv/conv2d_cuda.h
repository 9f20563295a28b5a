// Conv2d on the GPU through cuDNN (fp32, bf16, fp16): the twin of the CPU im2col/Winograd
// path in ops/conv/conv2d_cpu.h, with the same semantics:
//   x  [N, C, H, W]      w  [OC, C, KH, KW]      b  [OC] (nullable)
//   y  [N, OC, OH, OW]   OH = (H + 2*pad - KH) / stride + 1   (cross-correlation, zero padding)
// forward: y = conv(x, w) + b, then ReLU when `relu` (fused).
// backward: with `relu`, dy is first masked by y > 0 (in place);
//   dw (+)= dL/dw, db (+)= per-channel sums of dy (db nullable), dx = dL/dx (dx nullable).
// `accumulate`: dw and db are added to instead of overwritten; dx is always overwritten.
//
// Conv2dCuda owns the cuDNN descriptors of one layer shape (tensor, filter and
// convolution descriptors, destroyed with the object) and the algorithms
// chosen for them. Everything but the batch size is fixed at construction;
// descriptors and algorithms are rebuilt when the batch size changes (a short
// last batch). With a Conv2dShape s (ops/conv/conv2d_cpu.h): Conv2dCuda conv(s.oc, s.g);
// conv.forward(ctx, s.n, ...). (The interface takes ConvGeometry rather than
// Conv2dShape because ops/conv/conv2d_cpu.h pulls in fmt, which nvcc cannot compile.)
//
// Precision and determinism: the convolution runs in fp32 with
// CUDNN_FMA_MATH (CUDNN_DEFAULT_MATH would let cuDNN use TF32 tensor cores on
// Ampere and Hopper, which rounds inputs to 10 mantissa bits): parity with the
// CPU path. Algorithms come, per batch size and once for it, from cuDNN's
// heuristics (cudnnGet*Algorithm_v7: every rank with the same GPU and library
// picks the same ones) or, when the context says ConvSearch::Benchmark, from
// timing the candidates (cudnnFind*, fastest first; ranks may then differ,
// which changes nothing for lockstep: every rank applies the same averaged
// gradient). From either list the first entry is taken that
// reports success, is deterministic (CUDNN_DETERMINISTIC: for backward this
// rules out the atomics-based algorithms), uses no tensor-op math, and whose
// workspace fits the limit (ctx.conv_policy(): search, limit, and whether
// determinism is required). Only when no deterministic algorithm fits, or
// when the policy allows any, is a non-deterministic one taken
// (algorithms().deterministic says so). Under ConvSearch::Benchmark the first
// call of each direction at a batch size (forward, backward data, backward
// filter) also races the chosen legacy algorithm against up to 8 engine
// configurations of cuDNN's graph API (ops/conv/conv_plan.h; the same determinism
// and workspace rules, and no tensor cores in fp32) on that call's inputs, and
// keeps the fastest for that size. A plan enters the race only if its output
// agrees with the legacy algorithm's (ops/disagreement/disagreement.h, measured on the
// device; bounds 2^-4 bf16, 2^-7 fp16, 2^-13 fp32): some engines round
// partial sums in the 16-bit type. Outside Benchmark, and inside a capture
// until a call outside it decides, the legacy algorithms run. The bias,
// ReLU, ReLU mask and bias gradient are own kernels (the bias gradient sums in
// double in a fixed order: the same bits on every run).
//
// 16-bit (mixed precision; an object made with ConvData::BF16 or F16): x, w,
// y, dy, dx are bf16 or IEEE half arrays (void*), the bias b and the parameter
// gradients dw, db stay fp32. cuDNN's pseudo-16-bit configurations: 16-bit
// tensors, fp32 accumulation (convolution compute type FLOAT) on tensor cores
// (CUDNN_TENSOR_OP_MATH; tensor-op algorithms allowed). The forward rounds
// cuDNN's output to the 16-bit type, then the bias + ReLU epilogue adds in fp32
// and rounds once more (as PyTorch's 16-bit convolution followed by its bias
// add). dw: cuDNN writes it in the 16-bit type (it must match x's type) into
// scratch, and a kernel widens it into the fp32 dw (added with `accumulate`) --
// the gradient of an fp32 master weight used in 16 bits, as under PyTorch
// autocast (with fp16 and a loss scale, an overflow there is an inf in dw,
// which the loss scaler sees). db sums the 16-bit dy in double, as in fp32.
//
// Layout (tensor/layout.h): with Layout::NHWC, x, dx are [N, H, W, C] and y,
// dy [N, OH, OW, OC] in memory (the shapes below stay logical), and the cuDNN
// descriptors say so; w and dw keep the canonical [OC, C, KH, KW] order, and
// each call reorders the weight into [OC, KH, KW, C] (the NHWC filter format
// tensor-core kernels read) and cuDNN's weight gradient back, in a workspace
// block ahead of cuDNN's scratch (OC*C*KH*KW elements; small next to the
// activations). The bias epilogue and bias gradient have channels-last
// kernels (channels contiguous; the gradient in a fixed order, as above).
//
// Calls are asynchronous on ctx's stream (its cuDNN handle is bound to it);
// scratch comes from ctx.workspace(). All pointers are device memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "cuda/context.h"
#include "ops/conv/im2col.h"
#include "tensor/layout.h"

namespace lockstep::ops {

// The element type of a convolution's tensors (not of its fp32 bias and gradients).
enum class ConvData { F32, BF16, F16 };

class Conv2dCuda {
 public:
  // One layer shape: `oc` output channels and geometry `g` (a Conv2dShape's .oc
  // and .g); the batch size is given per call (a Conv2dShape's .n), and the
  // descriptors for a batch size are made on first use.
  Conv2dCuda(int64_t oc, const ConvGeometry& g, ConvData data = ConvData::F32, Layout layout = Layout::NCHW);
  ~Conv2dCuda();
  Conv2dCuda(Conv2dCuda&&) noexcept;
  Conv2dCuda& operator=(Conv2dCuda&&) noexcept;
  Conv2dCuda(const Conv2dCuda&) = delete;
  Conv2dCuda& operator=(const Conv2dCuda&) = delete;

  // x [n, C, H, W], w [OC, C, KH, KW], b [OC] (nullable) -> y [n, OC, OH, OW].
  // x, w, y (and dy, dx) are of the object's type: fp32 for ConvData::F32, else
  // that 16-bit type; b, dw, db are always fp32.
  void forward(cuda::Context& ctx, int64_t n, const void* x, const void* w, const float* b, void* y, bool relu);
  // y: the forward output (read only with `relu`); dy [n, OC, OH, OW] (masked in
  // place with `relu`); dx [n, C, H, W] (nullable); dw [OC, C, KH, KW]; db [OC] (nullable).
  void backward(cuda::Context& ctx, int64_t n, const void* x, const void* w, const void* y, void* dy, void* dx,
                float* dw, float* db, bool accumulate, bool relu);
  ConvData data() const;

  // The algorithms chosen for batch size n > 0 (chosen now if they were not
  // yet), as cudnnConvolution*Algo_t values, with their workspace sizes.
  struct Algorithms {
    int forward = -1, backward_data = -1, backward_filter = -1;
    size_t forward_bytes = 0, backward_data_bytes = 0, backward_filter_bytes = 0;
    bool deterministic = true;  // all three are CUDNN_DETERMINISTIC
    bool benchmarked = false;   // chosen by timing (cudnnFind*), not by the heuristics
    // Under ConvSearch::Benchmark, once a direction was raced at this
    // batch size (its first call): the cuDNN graph-API engine (global index)
    // that computes it when it beat the legacy algorithm in the timed race,
    // else -1 (the direction's *_bytes are then that plan's workspace, and
    // `deterministic` covers the plan too).
    int64_t forward_engine = -1, backward_data_engine = -1, backward_filter_engine = -1;
  };
  Algorithms algorithms(cuda::Context& ctx, int64_t n);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep::ops
