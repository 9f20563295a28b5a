// im2col / col2im for one NCHW image (CPU).
//   x    [C, H, W]
//   col  [C*KH*KW, OH*OW] with row stride `ld` (>= OH*OW), so several images can
//        be laid side by side as column blocks of one wide matrix.
// col2im adds into x (the caller zeroes it first).
#pragma once

#include <cstdint>

namespace lockstep::ops {

struct ConvGeometry {
  int64_t c, h, w;     // input channels, height, width
  int64_t kh, kw;      // kernel
  int64_t stride, pad;
  int64_t oh, ow;      // output height, width
  int64_t k() const { return c * kh * kw; }
  int64_t p() const { return oh * ow; }
};

void im2col(const ConvGeometry& g, const float* x, float* col, int64_t ld);
void col2im(const ConvGeometry& g, const float* col, int64_t ld, float* x);

}  // namespace lockstep::ops
