// Synthetic data of any shape and class count, for benchmarks and tests.
// Sample i is a pure function of (seed, first + i): a class-dependent pattern
// (the same for every split of one seed) plus noise, so a model can learn it,
// a test split (another `first`) measures generalisation, and every rank sees
// the same sample i.
#pragma once

#include "data/dataset.h"

namespace lockstep {

class SyntheticDataset final : public Dataset {
 public:
  SyntheticDataset(std::string name, Shape sample_shape, int64_t num_classes, int64_t size, uint64_t seed,
                   int64_t first = 0);
  std::string name() const override { return name_; }
  int64_t size() const override { return size_; }
  Shape sample_shape() const override { return shape_; }
  int64_t num_classes() const override { return classes_; }
  void fill(std::span<const int64_t> indices, void* inputs, int32_t* labels) const override;

 private:
  std::string name_;
  Shape shape_;
  int64_t classes_, size_;
  uint64_t seed_;
  int64_t first_;
};

}  // namespace lockstep
