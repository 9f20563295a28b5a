// Crop-and-flip augmentation, in place, one row of scratch per call.
#include "data/augment.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/hash.h"
#include "core/rng.h"

namespace lockstep {

CropFlipDraw crop_flip_draw(uint64_t seed, int64_t epoch, int64_t sample, int64_t pad) {
  Rng rng(rng_key(seed, fnv1a("augment-crop-flip"), static_cast<uint64_t>(epoch), static_cast<uint64_t>(sample)));
  const uint64_t span = static_cast<uint64_t>(2 * pad + 1);
  CropFlipDraw d;
  d.dy = static_cast<int64_t>(rng.below(span));
  d.dx = static_cast<int64_t>(rng.below(span));
  d.flip = (rng.next_u64() >> 63) != 0;
  return d;
}

void apply_crop_flip(float* sample, const Shape& shape, int64_t pad, const CropFlipDraw& d, float* row) {
  const int64_t C = shape[0], H = shape[1], W = shape[2];
  const int64_t sy = d.dy - pad, sx = d.dx - pad;  // source offset of output (0, 0)
  if (sy == 0 && sx == 0 && !d.flip) return;
  for (int64_t c = 0; c < C; ++c) {
    float* plane = sample + c * H * W;  // [H, W]
    // Output row y reads input row y + sy. Walking away from the rows still to
    // be read (down when sy > 0, up otherwise) never reads a row already written.
    for (int64_t i = 0; i < H; ++i) {
      const int64_t y = sy > 0 ? i : H - 1 - i;
      float* out = plane + y * W;
      const int64_t src = y + sy;
      if (src < 0 || src >= H) {
        std::fill(out, out + W, 0.f);
        continue;
      }
      std::copy(plane + src * W, plane + src * W + W, row);
      for (int64_t x = 0; x < W; ++x) {
        const int64_t xs = (d.flip ? W - 1 - x : x) + sx;
        out[x] = xs >= 0 && xs < W ? row[xs] : 0.f;
      }
    }
  }
}

void crop_flip_batch(float* images, std::span<const int64_t> samples, const Shape& sample_shape, uint64_t seed,
                     int64_t epoch, int64_t pad) {
  LS_CHECK(sample_shape.rank() == 3, "crop-flip augmentation needs [C, H, W] samples, got {}", sample_shape.str());
  LS_CHECK(pad >= 0, "crop padding {} must not be negative", pad);
  const int64_t per = sample_shape.numel();
  std::vector<float> row(static_cast<size_t>(sample_shape[2]));  // [W]
  for (size_t k = 0; k < samples.size(); ++k)
    apply_crop_flip(images + static_cast<int64_t>(k) * per, sample_shape, pad,
                    crop_flip_draw(seed, epoch, samples[k], pad), row.data());
}

}  // namespace lockstep
