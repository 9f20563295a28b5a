// InMemoryDataset: validation at construction, normalising fill.
#include "data/dataset.h"

#include <cmath>

namespace lockstep {

InMemoryDataset::InMemoryDataset(std::string name, Tensor images, Tensor labels, int64_t num_classes,
                                 Normalization norm)
    : name_(std::move(name)), images_(std::move(images)), labels_(std::move(labels)), num_classes_(num_classes),
      norm_(norm) {
  LS_CHECK(images_.dtype() == DType::U8 && images_.rank() == 4, "{}: images must be uint8 [N, C, H, W], got {}",
           name_, images_.shape().str());
  LS_CHECK(labels_.dtype() == DType::I32 && labels_.rank() == 1 && labels_.size(0) == images_.size(0),
           "{}: {} labels for {} images", name_, labels_.numel(), images_.size(0));
  LS_CHECK(norm_.std > 0.f, "{}: normalisation std must be positive", name_);
  const int32_t* l = labels_.data<int32_t>();
  for (int64_t i = 0; i < labels_.numel(); ++i)
    LS_CHECK_INPUT(l[i] >= 0 && l[i] < num_classes_, "{}: label {} of sample {} is outside [0, {})", name_, l[i], i,
                   num_classes_);
}

Shape InMemoryDataset::sample_shape() const {
  return Shape{images_.size(1), images_.size(2), images_.size(3)};
}

void InMemoryDataset::fill(std::span<const int64_t> indices, void* inputs, int32_t* labels) const {
  auto* images = static_cast<float*>(inputs);
  const int64_t per = images_.numel() / std::max<int64_t>(images_.size(0), 1);
  const uint8_t* src = images_.data<uint8_t>();
  const int32_t* lab = labels_.data<int32_t>();
  const float scale = 1.f / (255.f * norm_.std), shift = norm_.mean / norm_.std;
  for (size_t k = 0; k < indices.size(); ++k) {
    const int64_t i = indices[k];
    LS_CHECK(i >= 0 && i < size(), "{}: sample index {} outside [0, {})", name_, i, size());
    const uint8_t* s = src + i * per;
    float* d = images + static_cast<int64_t>(k) * per;
    for (int64_t e = 0; e < per; ++e) d[e] = static_cast<float>(s[e]) * scale - shift;
    labels[k] = lab[i];
  }
}

Normalization InMemoryDataset::pixel_statistics() const {
  const uint8_t* p = images_.data<uint8_t>();
  const int64_t n = images_.numel();
  uint64_t hist[256] = {};
  for (int64_t i = 0; i < n; ++i) ++hist[p[i]];
  double sum = 0, sq = 0;
  for (int v = 0; v < 256; ++v) {
    const double x = v / 255.0;
    sum += x * static_cast<double>(hist[v]);
    sq += x * x * static_cast<double>(hist[v]);
  }
  const double mean = n ? sum / static_cast<double>(n) : 0.0;
  const double var = n ? sq / static_cast<double>(n) - mean * mean : 1.0;
  return {static_cast<float>(mean), static_cast<float>(var > 1e-12 ? std::sqrt(var) : 1.0)};
}

}  // namespace lockstep
