// Device memory for tensors without cudaMalloc/cudaFree in the steady state.
//
// Requests are rounded up to a size class (512 B below 2 KiB, then quarter
// steps between powers of two, but steps of at most 2 MiB: at most 25% and at
// most 2 MiB wasted -- quarter steps alone round resnet50's activations,
// 1.53 x 2^k bytes, to 1.75 x 2^k) and a freed block goes back to its class's
// free list instead of to the driver. A training step asks
// for the same sizes every time, so from the second step on every request is
// served from the cache: stats().device_mallocs stops growing (the tests check
// this). When cudaMalloc fails, every cached free block is released and the
// allocation retried once before the error.
//
// Stream order: allocate() zero-fills with cudaMemsetAsync on the allocator's
// stream, and a freed block may be handed out again immediately, so a tensor's
// last use must be on that stream (or have been waited for) before it is freed.
// Buffers used on other streams (NCCL, copies) are long-lived and freed only
// after a synchronisation.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tensor/allocator.h"

namespace lockstep::cuda {

struct AllocatorStats {
  int64_t allocated_bytes = 0;       // held by live tensors (rounded sizes)
  int64_t peak_allocated_bytes = 0;
  int64_t reserved_bytes = 0;        // obtained from cudaMalloc (live + cached)
  int64_t peak_reserved_bytes = 0;
  int64_t device_mallocs = 0;        // cudaMalloc calls so far
  int64_t device_frees = 0;          // cudaFree calls so far
  int64_t cache_hits = 0;            // requests served from a free list
};

class CachingAllocator final : public Allocator {
 public:
  // `device`: the CUDA ordinal; `stream`: where zero-fills are queued.
  CachingAllocator(int device, cudaStream_t stream);
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  void* allocate(size_t nbytes) override;  // zero-filled (asynchronously, on the stream)
  void deallocate(void* ptr, size_t nbytes) override;
  Device device() const override { return Device::cuda(device_); }

  AllocatorStats stats() const;
  void reset_peaks();
  // Returns every cached free block to the driver (synchronises the device).
  void release_cached();

  // The size class a request of `nbytes` is rounded to (exposed for tests).
  static size_t round_size(size_t nbytes);

 private:
  void release_cached_locked();

  int device_;
  cudaStream_t stream_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;       // size class -> free blocks
  std::unordered_map<void*, size_t> live_;          // block -> size class
  AllocatorStats stats_;
};

// Page-locked host memory (cudaHostAlloc): the staging side of asynchronous
// host<->device copies. Zero-filled. Tensors from it report Device::cpu().
class PinnedAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override;
  void deallocate(void* ptr, size_t nbytes) override;
  Device device() const override { return Device::cpu(); }
};

}  // namespace lockstep::cuda
