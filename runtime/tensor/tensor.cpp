// Tensor creation, views and simple host-side fills and copies.
#include "tensor/tensor.h"

#include <algorithm>
#include <cstring>

namespace lockstep {

Tensor Tensor::zeros(const Shape& shape, DType dtype, std::shared_ptr<Allocator> allocator) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(std::move(allocator), t.nbytes());
  return t;
}

Tensor Tensor::from_vector(const Shape& shape, const std::vector<float>& values) {
  LS_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "from_vector: {} values for shape {}", values.size(),
           shape.str());
  Tensor t = zeros(shape);
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  LS_CHECK(shape.numel() == numel(), "cannot reshape {} to {}", shape_.str(), shape.str());
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::slice(int64_t offset, const Shape& shape) const {
  LS_CHECK(offset >= 0 && offset + shape.numel() <= numel(), "slice [{}, {}) outside a tensor of {} elements", offset,
           offset + shape.numel(), numel());
  Tensor t = *this;
  t.offset_bytes_ += static_cast<size_t>(offset) * size_of(dtype_);
  t.shape_ = shape;
  return t;
}

Tensor Tensor::narrow_rows(int64_t n) const {
  LS_CHECK(rank() >= 1 && n >= 0 && n <= shape_[0], "narrow_rows({}) of shape {}", n, shape_.str());
  Shape s = shape_;
  s[0] = n;
  return slice(0, s);
}

void Tensor::copy_from(const Tensor& src) {
  LS_CHECK(src.numel() == numel() && src.dtype() == dtype_, "copy_from: {} {} into {} {}", dtype_name(src.dtype()),
           src.shape().str(), dtype_name(dtype_), shape_.str());
  LS_CHECK(device().is_cpu() && src.device().is_cpu(), "copy_from: host tensors only");
  if (nbytes()) std::memmove(raw_data(), src.raw_data(), nbytes());
}

void Tensor::fill(float value) {
  std::fill_n(data<float>(), numel(), value);
}

void Tensor::zero() {
  LS_CHECK(device().is_cpu(), "zero: host tensors only");
  if (nbytes()) std::memset(raw_data(), 0, nbytes());
}

std::vector<float> Tensor::to_vector() const {
  const float* p = data<float>();
  return std::vector<float>(p, p + numel());
}

}  // namespace lockstep
