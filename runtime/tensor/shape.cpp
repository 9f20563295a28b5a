// Shape construction with validation (no negative extents, bounded rank).
#include "tensor/shape.h"

#include "core/error.h"

namespace lockstep {

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::span<const int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const int64_t> dims) {
  LS_CHECK(dims.size() <= static_cast<size_t>(kMaxDims), "shape has {} dimensions, at most {} supported", dims.size(),
           kMaxDims);
  for (size_t i = 0; i < dims.size(); ++i) {
    LS_CHECK(dims[i] >= 0, "negative extent {} in dimension {}", dims[i], i);
    dims_[i] = dims[i];
  }
  rank_ = static_cast<int>(dims.size());
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<size_t>(i)];
  return n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[static_cast<size_t>(i)]);
  }
  return s + "]";
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[static_cast<size_t>(i)] != o.dims_[static_cast<size_t>(i)]) return false;
  return true;
}

}  // namespace lockstep
