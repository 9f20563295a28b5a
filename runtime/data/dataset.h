// Dataset interface: a fixed number of labelled samples, each a tensor of
// sample_shape() in input_dtype(): fp32 images [C, H, W], or int32 tokens [T]
// whose targets are the next T tokens. fill() writes a batch of samples given
// their indices; it must be safe to call from the loader's prefetch thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace lockstep {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::string name() const = 0;
  virtual int64_t size() const = 0;
  virtual Shape sample_shape() const = 0;
  virtual int64_t num_classes() const = 0;
  // The element type of a sample: F32 (images) or I32 (tokens).
  virtual DType input_dtype() const { return DType::F32; }
  // Targets per sample: one class label, or T next tokens.
  virtual int64_t targets_per_sample() const { return 1; }
  // inputs: indices.size() * sample numel elements of input_dtype();
  // labels: indices.size() * targets_per_sample() ints.
  virtual void fill(std::span<const int64_t> indices, void* inputs, int32_t* labels) const = 0;
  // How raw pixels in [0, 1] become model inputs ((x - mean) / std); identity if none.
  virtual std::pair<float, float> input_normalization() const { return {0.f, 1.f}; }
};

// Per-pixel affine normalisation applied to 8-bit images: (x/255 - mean) / std.
struct Normalization {
  float mean = 0.f;
  float std = 1.f;
};

// Samples held in memory as 8-bit pixels, normalised on the way out.
class InMemoryDataset final : public Dataset {
 public:
  // images [N, C, H, W] uint8, labels [N] int32 in [0, classes).
  InMemoryDataset(std::string name, Tensor images, Tensor labels, int64_t num_classes, Normalization norm);
  std::string name() const override { return name_; }
  int64_t size() const override { return images_.size(0); }
  Shape sample_shape() const override;
  int64_t num_classes() const override { return num_classes_; }
  void fill(std::span<const int64_t> indices, void* inputs, int32_t* labels) const override;

  std::pair<float, float> input_normalization() const override { return {norm_.mean, norm_.std}; }
  // Mean and standard deviation of all pixels, scaled to [0, 1].
  Normalization pixel_statistics() const;
  void set_normalization(Normalization n) { norm_ = n; }

 private:
  std::string name_;
  Tensor images_;  // uint8 [N, C, H, W]
  Tensor labels_;  // int32 [N]
  int64_t num_classes_;
  Normalization norm_;
};

}  // namespace lockstep
