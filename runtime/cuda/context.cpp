// Per-rank GPU context construction and the shared scratch workspace.
#include "cuda/context.h"

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
      cublas_(stream_.get()),
      cudnn_(stream_.get()) {}

Context::~Context() {
  cudaStreamSynchronize(stream_.get());
  if (workspace_) allocator_->deallocate(workspace_, workspace_bytes_);
}

void* Context::workspace(size_t bytes) {
  if (bytes <= workspace_bytes_) return workspace_;
  if (workspace_) allocator_->deallocate(workspace_, workspace_bytes_);
  workspace_ = allocator_->allocate(bytes);
  workspace_bytes_ = bytes;
  return workspace_;
}

}  // namespace lockstep::cuda
