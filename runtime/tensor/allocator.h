// Allocator interface: tensors own their bytes through a Storage that returns
// them to the allocator that made them. The CPU allocator hands out 64-byte
// aligned, zero-filled memory; a caching CUDA allocator joins with the GPU path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "tensor/device.h"

namespace lockstep {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  virtual Device device() const = 0;
};

class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kAlignment = 64;
  // Allocations of this size or more are checked against the memory the
  // kernel says is available less kKeptFree (headroom for everything else):
  // zero-filling more would get the process killed by the OOM killer (no
  // message) or swapped, so they throw OutOfMemory instead.
  static constexpr size_t kCheckedBytes = size_t{16} << 20;
  static constexpr int64_t kKeptFree = int64_t{512} << 20;
  void* allocate(size_t nbytes) override;  // zero-filled (pages touched)
  void deallocate(void* ptr, size_t nbytes) override;
  Device device() const override { return Device::cpu(); }
};

// A shared, stateless CPU allocator (no global state behind it).
std::shared_ptr<Allocator> cpu_allocator();

// Bytes of host memory available to new allocations without swapping
// (MemAvailable in /proc/meminfo), or -1 where that cannot be read.
int64_t host_memory_available();

// Throws OutOfMemory ("out of host memory for <what> (N MiB), with ...") when
// `bytes` (at least CpuAllocator::kCheckedBytes; smaller ones pass unread) is
// more than the host's available memory less CpuAllocator::kKeptFree. For
// allocators of host memory: the CPU's, and the GPU path's page-locked one.
void check_host_memory(size_t bytes, const char* what);

// Hands out one block of memory someone else owns (e.g. a shared-memory
// window), keeping `owner` alive while any tensor uses the block.
class BorrowedAllocator final : public Allocator {
 public:
  BorrowedAllocator(void* block, size_t bytes, std::shared_ptr<void> owner)
      : block_(block), bytes_(bytes), owner_(std::move(owner)) {}
  void* allocate(size_t nbytes) override;
  void deallocate(void*, size_t) override {}
  Device device() const override { return Device::cpu(); }

 private:
  void* block_;
  size_t bytes_;
  std::shared_ptr<void> owner_;
};

// A block of bytes owned by one allocator; freed when the last tensor using it goes.
class Storage {
 public:
  Storage(std::shared_ptr<Allocator> allocator, size_t nbytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return allocator_->device(); }

 private:
  std::shared_ptr<Allocator> allocator_;
  size_t nbytes_;
  void* data_;
};

}  // namespace lockstep
