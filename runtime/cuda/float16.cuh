// Element access for kernels templated on their storage type (.cu files only):
// fp32, bf16 or IEEE half in memory, fp32 in registers. Loads widen exactly;
// stores round to nearest even once. Mixed precision keeps activations in a
// 16-bit type and does all arithmetic in fp32 (or fp64 for reductions).
//
// dispatch_16bit(dt, f) calls f(T{}) with T = __nv_bfloat16 for DType::BF16 or
// __half for DType::F16 (any other type throws): the host side of an op that
// takes its 16-bit storage type at run time,
//   dispatch_16bit(dt, [&](auto tag) { using T = decltype(tag); kernel<T><<<...>>>(...); });
// dispatch_storage(dt, f) does the same with T = float for DType::F32 too.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include "core/throw.h"
#include "tensor/dtype.h"

namespace lockstep::cuda {

__device__ inline float load(const float* p, int64_t i) { return p[i]; }
__device__ inline float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ inline float load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ inline void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ inline void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ inline void store(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }

template <typename F>
void dispatch_16bit(DType dt, F&& f) {
  if (dt == DType::BF16)
    f(__nv_bfloat16{});
  else if (dt == DType::F16)
    f(__half{});
  else
    LS_REQUIRE(false, std::string("a 16-bit GPU op was given ") + std::string(dtype_name(dt)) + " data (F16 or BF16 only)");
}

template <typename F>
void dispatch_storage(DType dt, F&& f) {
  if (dt == DType::F32)
    f(float{});
  else
    dispatch_16bit(dt, f);
}

}  // namespace lockstep::cuda
