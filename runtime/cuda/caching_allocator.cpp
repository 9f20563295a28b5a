// Size-class caching allocator for device memory, and the pinned host allocator.
#include "cuda/caching_allocator.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/device.h"

namespace lockstep::cuda {

size_t CachingAllocator::round_size(size_t nbytes) {
  constexpr size_t kMin = 512;
  if (nbytes <= 4 * kMin) return (nbytes + kMin - 1) / kMin * kMin;  // 512, 1024, 1536, 2048
  // A quarter of the power of two below, at most 2 MiB: large activations
  // (a resnet50 block's at batch 128 is 1.53 x 2^27 bytes) waste under 2 MiB
  // instead of up to a quarter.
  constexpr size_t kMaxStep = size_t{2} << 20;
  const size_t step = std::min(std::bit_floor(nbytes) / 4, kMaxStep);
  return (nbytes + step - 1) / step * step;
}

CachingAllocator::CachingAllocator(int device, cudaStream_t stream) : device_(device), stream_(stream) {}

CachingAllocator::~CachingAllocator() {
  // Live blocks at destruction belong to tensors that outlive the allocator's
  // owner; they are leaked rather than freed under a user (Storage keeps a
  // shared_ptr to its allocator, so this only happens at process exit).
  // Never throws (a destructor, possibly during unwinding after a sticky
  // device error): CUDA calls unchecked.
  std::lock_guard lock(mu_);
  int previous = device_;
  (void)cudaGetDevice(&previous);
  (void)cudaSetDevice(device_);
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) cudaFree(p);
  }
  (void)cudaSetDevice(previous);
}

void* CachingAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const size_t size = round_size(nbytes);
  std::lock_guard lock(mu_);
  DeviceGuard guard(device_);
  void* p = nullptr;
  if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    ++stats_.cache_hits;
  } else {
    cudaError_t e = cudaMalloc(&p, size);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      release_cached_locked();
      e = cudaMalloc(&p, size);
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      // Only cudaErrorMemoryAllocation is a lack of memory; any other error
      // (a malloc during a stream capture, a sticky error) is named as such.
      const std::string what =
          fmt::format("{} on cuda:{} allocating {} bytes ({}): {} bytes in use by tensors, {} reserved, {} free of {}",
                      e == cudaErrorMemoryAllocation ? "out of GPU memory" : "cudaMalloc failed", device_, size,
                      cudaGetErrorName(e), stats_.allocated_bytes, stats_.reserved_bytes, free_b, total_b);
      if (e == cudaErrorMemoryAllocation) throw OutOfMemory(__FILE__, __LINE__, what);
      LS_THROW("{}", what);
    }
    ++stats_.device_mallocs;
    stats_.reserved_bytes += static_cast<int64_t>(size);
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  }
  live_[p] = size;
  stats_.allocated_bytes += static_cast<int64_t>(size);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  LS_CUDA_CHECK(cudaMemsetAsync(p, 0, nbytes, stream_));
  return p;
}

void CachingAllocator::deallocate(void* ptr, size_t) {
  if (!ptr) return;
  std::lock_guard lock(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return;  // not ours; never happens through Storage
  stats_.allocated_bytes -= static_cast<int64_t>(it->second);
  free_[it->second].push_back(ptr);
  live_.erase(it);
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void CachingAllocator::reset_peaks() {
  std::lock_guard lock(mu_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

void CachingAllocator::release_cached() {
  std::lock_guard lock(mu_);
  DeviceGuard guard(device_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() {
  LS_CUDA_CHECK(cudaDeviceSynchronize());  // queued work may still use a freed block
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) {
      LS_CUDA_CHECK(cudaFree(p));
      ++stats_.device_frees;
      stats_.reserved_bytes -= static_cast<int64_t>(size);
    }
    blocks.clear();
  }
}

void* PinnedAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  check_host_memory(nbytes, "a page-locked buffer");  // locked pages cannot be swapped out either
  void* p = nullptr;
  const cudaError_t e = cudaHostAlloc(&p, nbytes, cudaHostAllocDefault);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw OutOfMemory(__FILE__, __LINE__,
                      fmt::format("out of host memory for a page-locked buffer ({:.0f} MiB; {})",
                                  static_cast<double>(nbytes) / (1 << 20), cudaGetErrorName(e)));
  }
  LS_CUDA_CHECK(e);
  std::memset(p, 0, nbytes);
  return p;
}

void PinnedAllocator::deallocate(void* ptr, size_t) {
  if (ptr) cudaFreeHost(ptr);
}

}  // namespace lockstep::cuda
