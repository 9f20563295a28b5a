// Seeded data augmentation for [C, H, W] float samples: random crop with zero
// padding and a horizontal flip with probability 1/2 (the standard CIFAR
// recipe). A sample's crop offsets and flip are a pure function of
// (seed, epoch, global sample index), so a sample is augmented the same way at
// any world size, with any prefetch timing and after a resume.
#pragma once

#include <cstdint>
#include <span>

#include "tensor/shape.h"

namespace lockstep {

constexpr int64_t kCropPad = 4;  // pixels of zero padding on every side

// One sample's augmentation. The crop's top-left corner is (dy, dx) in the
// padded image, each in [0, 2 * pad]; (pad, pad) without a flip is the identity.
struct CropFlipDraw {
  int64_t dy = 0, dx = 0;
  bool flip = false;
};

// The draw for global sample `sample` in `epoch`.
CropFlipDraw crop_flip_draw(uint64_t seed, int64_t epoch, int64_t sample, int64_t pad = kCropPad);

// Applies `d` to one sample [C, H, W] in place. Padding is 0, which in
// normalised space is the mean pixel:
//   out[c][y][x] = in[c][y + dy - pad][x' + dx - pad], x' = W-1-x if flipped else x; 0 outside.
// row: scratch of at least W floats.
void apply_crop_flip(float* sample, const Shape& shape, int64_t pad, const CropFlipDraw& d, float* row);

// Augments a batch in place: images [n, C, H, W], samples[k] = global index of
// image k (n = samples.size()). Allocates one row of scratch per call.
void crop_flip_batch(float* images, std::span<const int64_t> samples, const Shape& sample_shape, uint64_t seed,
                     int64_t epoch, int64_t pad = kCropPad);

}  // namespace lockstep
