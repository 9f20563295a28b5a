// CPU allocation: aligned, zeroed, with a clear error when memory runs out.
#include "tensor/allocator.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "core/error.h"

namespace lockstep {

int64_t host_memory_available() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024;
    std::getline(in, unit);  // the rest of the line ("kB")
  }
  return -1;
}

void check_host_memory(size_t bytes, const char* what) {
  if (bytes < CpuAllocator::kCheckedBytes) return;
  const int64_t available = host_memory_available();
  if (available < 0 || static_cast<int64_t>(bytes) <= available - CpuAllocator::kKeptFree) return;
  const double mib = 1 << 20;
  throw OutOfMemory(__FILE__, __LINE__,
                    fmt::format("out of host memory for {} ({:.0f} MiB), with {:.0f} MiB available (MemAvailable in "
                                "/proc/meminfo; {:.0f} MiB of it kept free)",
                                what, static_cast<double>(bytes) / mib, static_cast<double>(available) / mib,
                                static_cast<double>(CpuAllocator::kKeptFree) / mib));
}

void* CpuAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  check_host_memory(rounded, "a tensor");
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr)
    throw OutOfMemory(__FILE__, __LINE__,
                      fmt::format("out of host memory for a tensor ({:.0f} MiB)",
                                  static_cast<double>(rounded) / (1 << 20)));
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
