// Layout conversion between channels-first and channels-last (CPU):
//   nchw [n, c, hw]  <->  nhwc [n, hw, c]
// for a batch of n items of c channels over hw positions. The same transposes
// turn a convolution weight [OC, C, KH, KW] into [OC, KH, KW, C] and back
// (n = OC, c = C, hw = KH * KW). Pure copies: bitwise. src and dst must not
// overlap. The GPU twins are in ops/layout/layout_cuda.h.
#pragma once

#include <cstdint>

namespace lockstep::ops {

void nchw_to_nhwc_cpu(int64_t n, int64_t c, int64_t hw, const float* src, float* dst);
void nhwc_to_nchw_cpu(int64_t n, int64_t c, int64_t hw, const float* src, float* dst);

}  // namespace lockstep::ops
