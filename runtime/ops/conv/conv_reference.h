// The accurate reference of a convolution race (race_plans, ops/conv/conv_plan.h):
// a legacy cuDNN algorithm that neither transforms its operands (Winograd,
// FFT) nor sums with atomics -- implicit GEMM for the forward, ALGO_1 for
// either backward direction -- in the first math type cuDNN accepts for it.
//
// Why the race needs one: it admits a contender by agreement with the
// reference output. With the chosen legacy algorithm as the reference, one
// that is itself off shuts out every accurate plan: on an H100 (2026-11-24)
// fp16 WINOGRAD_NONFUSED (a 5x5 forward, 1.06e-2 off the CPU) and, under
// --cudnn-nondeterministic, bf16 filter-gradient ALGO_0 (convnet's first
// layer, 0.139 off every plan) each kept themselves that way; the second cost
// convnet bf16 NHWC 43% of its speed. With this reference the chosen legacy
// algorithm is a contender like the plans, admitted by the same bound.
//
// Operands as the legacy calls take them (ops/conv/conv_plan.h's table): `a`, `b`
// are the direction's inputs (forward x, w; backward data w, dy; backward
// filter x, dy) and `out` its output, overwritten.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <optional>

#include "ops/conv/conv_plan.h"

namespace lockstep::ops {

// The layer's legacy descriptors (owned by the caller), batch size prepared.
struct ConvDescriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;  // y: also dy's
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
};

struct ConvReference {
  ConvDirection dir = ConvDirection::Forward;
  int algo = 0;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace_bytes = 0;
};

// The reference for `dir`, or nullopt when cuDNN supports none of them here
// within `limit` bytes of scratch. `sixteen_bit`: try tensor-op math, then the
// default; fp32 keeps the descriptor's math type (FMA: no TF32). Sets the
// descriptor's math type while it asks (16-bit): callers set theirs per call.
std::optional<ConvReference> find_reference(cudnnHandle_t handle, const ConvDescriptors& d, ConvDirection dir,
                                            bool sixteen_bit, size_t limit);

// Runs `r` on the handle's stream: out = the direction's output from a, b.
// Returns cuDNN's status (a failure is the caller's to handle: the race then
// takes the legacy output as its reference).
cudnnStatus_t run_reference(cudnnHandle_t handle, const ConvDescriptors& d, const ConvReference& r, bool sixteen_bit,
                            const void* a, const void* b, void* out, void* workspace);

}  // namespace lockstep::ops
