// Tensor: a contiguous (row-major, no strides) view of typed elements in a
// Storage. Views share storage, so parameter tensors can be windows into one
// flat buffer. numel() counts elements; nbytes() counts bytes; never mix them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/error.h"
#include "tensor/allocator.h"
#include "tensor/dtype.h"
#include "tensor/shape.h"

namespace lockstep {

class Tensor {
 public:
  Tensor() = default;  // undefined tensor

  // Zero-filled tensor on the allocator's device.
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32,
                      std::shared_ptr<Allocator> allocator = cpu_allocator());
  static Tensor from_vector(const Shape& shape, const std::vector<float>& values);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t size(int dim) const { return shape_[dim]; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  // An undefined tensor has no elements (its default shape alone would say 1).
  int64_t numel() const { return storage_ ? shape_.numel() : 0; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * size_of(dtype_); }

  void* raw_data() const { return static_cast<char*>(storage_->data()) + offset_bytes_; }
  template <typename T>
  T* data() const {
    LS_CHECK(dtype_of<T>() == dtype_, "tensor holds {}, accessed as {}", dtype_name(dtype_), dtype_name(dtype_of<T>()));
    return static_cast<T*>(raw_data());
  }
  template <typename T>
  std::span<T> span() const { return {data<T>(), static_cast<size_t>(numel())}; }

  // Same elements, another shape (numel must match). Shares storage.
  Tensor reshape(const Shape& shape) const;
  // `shape.numel()` elements starting at element `offset` of this tensor. Shares storage.
  Tensor slice(int64_t offset, const Shape& shape) const;
  // First `n` rows (along dimension 0) of this tensor. Shares storage.
  Tensor narrow_rows(int64_t n) const;

  // Same numel and dtype; any devices. Copies touching a GPU wait for all queued
  // device work first (off the hot path: tests, checkpoints, weights).
  void copy_from(const Tensor& src);
  // A copy of this tensor in memory from `allocator` (e.g. to or from a GPU).
  Tensor to(std::shared_ptr<Allocator> allocator) const;
  void fill(float value);             // F32, CPU
  void zero();                        // any dtype, any device (synchronous)
  std::vector<float> to_vector() const;  // F32, any device

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_bytes_ = 0;
  Shape shape_;
  DType dtype_ = DType::F32;
};

// `t` itself when its bytes are in host memory, otherwise a host copy (waits
// for queued device work: checkpoints, weights, replica checks).
Tensor on_host(const Tensor& t);
// Copies dst.nbytes() bytes from host memory at `src` into `dst`, on any device.
void copy_from_host(Tensor& dst, const void* src);

}  // namespace lockstep
