// 2-D convolution, NCHW, square stride and symmetric zero padding (CPU).
//   x  [N, C, H, W]      w  [OC, C, KH, KW]      b  [OC]
//   y  [N, OC, OH, OW]   OH = (H + 2*pad - KH) / stride + 1
// Lowered to GEMM over chunks of nb images: col [C*KH*KW, nb*OH*OW] holds the
// chunk's images side by side. nb is 1 unless an image has few output pixels,
// so the usual case writes straight into y with no scatter or gather copies.
// An optional fused ReLU is applied to each chunk while it is in cache, and in
// backward the ReLU mask (y > 0) is applied to dy chunk by chunk.
#pragma once

#include <cstdint>

#include "ops/conv/im2col.h"
#include "ops/workspace.h"

namespace lockstep::ops {

struct Conv2dShape {
  int64_t n, oc;
  ConvGeometry g;
};

// Images per GEMM chunk.
int64_t conv2d_chunk(const Conv2dShape& s);
// Whether the im2col path splits the threads' work by output channels (few
// output pixels per thread: the batch is lowered into one matrix, the GEMMs'
// rows are split) instead of by images.
bool conv2d_split_channels(const Conv2dShape& s, int threads);

// Algorithms. im2col+GEMM handles every shape; Winograd
// (conv2d_winograd_cpu.cpp) handles 3x3 stride-1 layers as F(4x4, 3x3) (4x
// fewer multiplies) or, for outputs too small for 4x4 tiles, F(2x2, 3x3)
// (2.25x), and 5x5 stride-1 layers as F(2x2, 5x5) (2.8x). Auto picks Winograd
// where it applies and has enough channels for its small-K GEMMs to pay off.
enum class ConvAlgo { Auto, Im2col, Winograd };
bool conv2d_winograd_applies(const Conv2dShape& s);
// The output tile side m of F(m x m, r x r) Winograd uses for this shape (2 or 4).
int conv2d_winograd_output_tile(const Conv2dShape& s);
// m x m output tiles per image (the output rounded up to multiples of m).
int64_t conv2d_winograd_tiles(const Conv2dShape& s, int m);
ConvAlgo conv2d_choose(const Conv2dShape& s, ConvAlgo requested);

void conv2d_winograd_forward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* b, float* y,
                                 bool relu, Workspace& ws);
// filters_from_forward: ws still holds the filter transform that the forward
// call on these weights left in it (nothing has used ws since, and w has not
// changed); backward then skips transforming w again. nn::Conv2d tracks this.
void conv2d_winograd_backward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* y, float* dy,
                                  float* dx, float* dw, float* db, bool accumulate, bool relu, Workspace& ws,
                                  bool filters_from_forward = false);

// Channels-last (NHWC, tensor/layout.h) im2col+GEMM path, conv2d_nhwc_cpu.cpp:
//   x [N, H, W, C]   y, dy [N, OH, OW, OC]   dx [N, H, W, C]
// w, b, dw, db keep the canonical layouts above ([OC, C, KH, KW], [OC]): the
// parameters are the same in either layout. Same semantics and arguments as
// conv2d_forward_cpu / conv2d_backward_cpu (relu, accumulate, nullable b, db, dx);
// results agree with the NCHW path to fp32 rounding (another summation order).
void conv2d_nhwc_forward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* b, float* y,
                             bool relu, Workspace& ws);
void conv2d_nhwc_backward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* y, float* dy,
                              float* dx, float* dw, float* db, bool accumulate, bool relu, Workspace& ws);

// im2col+GEMM path.
void conv2d_forward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* b, float* y, bool relu,
                        Workspace& ws);
// dw/db are overwritten unless `accumulate`; dx (nullable) is overwritten.
// With `relu`, y is the fused ReLU's output and dy is masked by y > 0 (dy may be
// modified in place).
void conv2d_backward_cpu(const Conv2dShape& s, const float* x, const float* w, const float* y, float* dy, float* dx,
                         float* dw, float* db, bool accumulate, bool relu, Workspace& ws);

}  // namespace lockstep::ops
