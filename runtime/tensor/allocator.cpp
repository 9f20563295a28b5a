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

void* CpuAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  const double mib = 1 << 20;
  if (rounded >= kCheckedBytes) {
    const int64_t available = host_memory_available();
    if (available >= 0 && static_cast<int64_t>(rounded) > available - kKeptFree)
      throw OutOfMemory(__FILE__, __LINE__,
                        fmt::format("out of host memory: a tensor of {:.0f} MiB, with {:.0f} MiB available "
                                    "(MemAvailable in /proc/meminfo; {:.0f} MiB of it kept free)",
                                    static_cast<double>(rounded) / mib, static_cast<double>(available) / mib,
                                    static_cast<double>(kKeptFree) / mib));
  }
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr)
    throw OutOfMemory(__FILE__, __LINE__,
                      fmt::format("out of host memory: a tensor of {:.0f} MiB", static_cast<double>(rounded) / mib));
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
