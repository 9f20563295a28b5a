// Tensor creation, views and simple host-side fills and copies.
#include "tensor/tensor.h"

#include <algorithm>
#include <cstring>

#ifdef LOCKSTEP_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda/check.h"
#endif

namespace lockstep {
namespace {

// Copies between host and device memory off the hot path (tests, checkpoints,
// weights): waits for all queued device work first, so the bytes read are the
// ones the step wrote. The step itself uses asynchronous copies on its streams.
void copy_across_devices(void* dst, const void* src, size_t nbytes, Device to, Device from) {
#ifdef LOCKSTEP_HAVE_CUDA
  LS_CUDA_CHECK(cudaDeviceSynchronize());
  LS_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDefault));
  // A pageable host->device cudaMemcpy may return before the DMA has landed,
  // and work on the non-blocking compute stream is not ordered after the
  // legacy stream: wait, so the copy is complete when this returns.
  LS_CUDA_CHECK(cudaDeviceSynchronize());
#else
  LS_THROW("copy from {} to {}: this build has no CUDA support", from.str(), to.str());
#endif
}

}  // namespace

Tensor Tensor::zeros(const Shape& shape, DType dtype, std::shared_ptr<Allocator> allocator) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(std::move(allocator), static_cast<size_t>(shape.numel()) * size_of(dtype));
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
  if (!nbytes()) return;
  if (device().is_cpu() && src.device().is_cpu()) {
    std::memmove(raw_data(), src.raw_data(), nbytes());
  } else {
    copy_across_devices(raw_data(), src.raw_data(), nbytes(), device(), src.device());
  }
}

Tensor Tensor::to(std::shared_ptr<Allocator> allocator) const {
  Tensor t = zeros(shape_, dtype_, std::move(allocator));
  t.copy_from(*this);
  return t;
}

void Tensor::fill(float value) {
  LS_CHECK(device().is_cpu(), "fill: host tensors only (tensor on {})", device().str());
  std::fill_n(data<float>(), numel(), value);
}

void Tensor::zero() {
  if (!nbytes()) return;
  if (device().is_cpu()) {
    std::memset(raw_data(), 0, nbytes());
    return;
  }
#ifdef LOCKSTEP_HAVE_CUDA
  LS_CUDA_CHECK(cudaDeviceSynchronize());
  LS_CUDA_CHECK(cudaMemset(raw_data(), 0, nbytes()));
  LS_CUDA_CHECK(cudaDeviceSynchronize());  // cudaMemset is asynchronous for device memory
#endif
}

Tensor on_host(const Tensor& t) { return t.device().is_cpu() ? t : t.to(cpu_allocator()); }

void copy_from_host(Tensor& dst, const void* src) {
  if (!dst.nbytes()) return;
  if (dst.device().is_cpu()) {
    std::memmove(dst.raw_data(), src, dst.nbytes());
    return;
  }
  copy_across_devices(dst.raw_data(), src, dst.nbytes(), dst.device(), Device::cpu());
}

std::vector<float> Tensor::to_vector() const {
  if (!device().is_cpu()) return to(cpu_allocator()).to_vector();
  const float* p = data<float>();
  return std::vector<float>(p, p + numel());
}

}  // namespace lockstep
