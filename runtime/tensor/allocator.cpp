// CPU allocation: aligned, zeroed, with a clear error when memory runs out.
#include "tensor/allocator.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace lockstep {

void* CpuAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  LS_CHECK(p != nullptr, "out of host memory allocating {} bytes", nbytes);
  std::memset(p, 0, rounded);
  return p;
}

void CpuAllocator::deallocate(void* ptr, size_t) { std::free(ptr); }

std::shared_ptr<Allocator> cpu_allocator() {
  static const std::shared_ptr<Allocator> allocator = std::make_shared<CpuAllocator>();
  return allocator;
}

void* BorrowedAllocator::allocate(size_t nbytes) {
  LS_CHECK(nbytes <= bytes_, "borrowed block of {} bytes cannot hold {}", bytes_, nbytes);
  return block_;
}

Storage::Storage(std::shared_ptr<Allocator> allocator, size_t nbytes)
    : allocator_(std::move(allocator)), nbytes_(nbytes), data_(allocator_->allocate(nbytes)) {}

Storage::~Storage() { allocator_->deallocate(data_, nbytes_); }

}  // namespace lockstep
