// Per-rank GPU context construction and the shared scratch workspace.
#include "cuda/context.h"

#include <utility>

#include "cuda/check.h"

namespace lockstep::cuda {
namespace {
int make_current(int device) {
  LS_CUDA_CHECK(cudaSetDevice(device));
  return device;
}
}  // namespace

Context::Context(int device)
    : device_(make_current(device)),
      stream_(),
      allocator_(std::make_shared<CachingAllocator>(device, stream_.get())),
      cublas_library_(),
      cublas_(cublas_library_, stream_.get()),
      cudnn_(stream_.get()) {}

Context::~Context() {
  cudaStreamSynchronize(stream_.get());
  if (workspace_) allocator_->deallocate(workspace_, workspace_bytes_);
}

void* Context::workspace(size_t bytes) {
  if (bytes <= workspace_bytes_) return workspace_;
  // Give the old block back first (an out-of-memory retry can reclaim it),
  // and forget it before allocating: if allocate() throws, no freed block is
  // handed out by a later call.
  void* old = std::exchange(workspace_, nullptr);
  const size_t old_bytes = std::exchange(workspace_bytes_, 0);
  if (old) allocator_->deallocate(old, old_bytes);
  workspace_ = allocator_->allocate(bytes);
  workspace_bytes_ = bytes;
  return workspace_;
}

void Context::trim_workspace(size_t bytes) {
  if (bytes >= workspace_bytes_) return;
  void* old = std::exchange(workspace_, nullptr);
  const size_t old_bytes = std::exchange(workspace_bytes_, 0);
  allocator_->deallocate(old, old_bytes);
  if (bytes > 0) (void)workspace(bytes);
}

}  // namespace lockstep::cuda
