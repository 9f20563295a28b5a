// Layout conversion between channels-first and channels-last on the GPU, the
// twins of ops/layout/layout_cpu.h:
//   nchw [n, c, hw]  <->  nhwc [n, hw, c]
// for elements of type dt (DType::F32, BF16 or F16; anything else throws):
// pure copies, bitwise the CPU transposes. Also turns a convolution weight
// [OC, C, KH, KW] into [OC, KH, KW, C] and back (n = OC, c = C, hw = KH * KW).
// Queued on `stream` (asynchronous); src and dst are device memory and must
// not overlap; n, c or hw may be 0.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tensor/dtype.h"

namespace lockstep::ops {

void nchw_to_nhwc_cuda(DType dt, int64_t n, int64_t c, int64_t hw, const void* src, void* dst, cudaStream_t stream);
void nhwc_to_nchw_cuda(DType dt, int64_t n, int64_t c, int64_t hw, const void* src, void* dst, cudaStream_t stream);

}  // namespace lockstep::ops
