// ops/disagreement/disagreement.h's measure on the GPU, for outputs too large to bring to
// the host at every comparison (Conv2dCuda's race compares whole activations:
// resnet50's stem output is 100 M values at batch 128):
//   max_i |got_i - ref_i| / (|ref_i| + rms(ref))
// with the same conventions (a NaN or inf in got where ref is finite gives
// infinity). ref and got hold n elements of dt (DType::F32, BF16 or F16) in
// device memory; arithmetic in fp64. Each block reduces a fixed stretch of the
// grid-stride loop and the host combines the blocks' partials in block order:
// the same inputs give the same result on every run. Both calls synchronise
// ctx's stream (they return a number to the host).
#pragma once

#include <cstdint>

#include "cuda/context.h"
#include "tensor/dtype.h"

namespace lockstep::ops {

// sqrt(sum ref_i^2 / n); 0 for n == 0.
double rms_cuda(cuda::Context& ctx, DType dt, const void* ref, int64_t n);
// The measure, with `rms` = rms_cuda(ctx, dt, ref, n) (computed once for many gots).
double disagreement_cuda(cuda::Context& ctx, DType dt, const void* ref, const void* got, int64_t n, double rms);

}  // namespace lockstep::ops
