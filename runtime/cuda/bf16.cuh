// Element access for kernels templated on their storage type (.cu files only):
// fp32 or bf16 in memory, fp32 in registers. Loads widen exactly; stores
// round to nearest even once. Mixed precision keeps activations in bf16 and
// does all arithmetic in fp32 (or fp64 for reductions).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace lockstep::cuda {

__device__ inline float load(const float* p, int64_t i) { return p[i]; }
__device__ inline float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ inline void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ inline void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }

}  // namespace lockstep::cuda
