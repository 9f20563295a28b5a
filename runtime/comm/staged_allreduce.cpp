// Allreduce of device buffers staged through pinned host memory and MPI.
#include "comm/staged_allreduce.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "core/error.h"
#include "cuda/check.h"
#include "tensor/tensor.h"

namespace lockstep {
namespace {

int current_device() {
  int d = 0;
  LS_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

constexpr size_t kGranule = size_t{1} << 20;  // pinned sizes are whole MiB

}  // namespace

StagedAllreduce::StagedAllreduce()
    : device_(current_device()), stream_(), pinned_(std::make_shared<cuda::PinnedAllocator>()) {}

StagedAllreduce::~StagedAllreduce() {
  // The last copy back may still read the pinned block.
  if (stream_.get()) cudaStreamSynchronize(stream_.get());
}

void StagedAllreduce::reserve(size_t bytes) {
  if (bytes <= capacity_) return;
  // Grow at least 2x so a slowly growing size does not reallocate every call;
  // after the first step of training the sizes repeat and nothing is allocated.
  size_t want = std::max(bytes, 2 * capacity_);
  want = (want + kGranule - 1) / kGranule * kGranule;
  stream_.synchronize();  // the previous copy back may still read the old block
  host_.reset();
  capacity_ = 0;
  void* p = pinned_->allocate(want);  // zero-filled: every page touched now, not inside MPI
  std::shared_ptr<cuda::PinnedAllocator> alloc = pinned_;
  host_ = std::shared_ptr<void>(p, [alloc, want](void* q) { alloc->deallocate(q, want); });
  capacity_ = want;
}

void StagedAllreduce::allreduce(Communicator& host_comm, void* device_buf, int64_t count, ReduceOp op,
                                const cuda::Event* ready, WireType wire) {
  LS_CHECK(count >= 0, "staged allreduce of {} elements", count);
  LS_CHECK(wire == WireType::F32 || op == ReduceOp::Sum, "staged allreduce: a 16-bit wire type needs a sum");
  if (count == 0) return;
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  reserve(bytes);
  void* host = host_.get();

  if (ready) ready->wait_on(stream_);
  LS_CUDA_CHECK(cudaMemcpyAsync(host, device_buf, bytes, cudaMemcpyDeviceToHost, stream_.get()));
  stream_.synchronize();

  // The pinned block as a host tensor (no copy; the block stays ours).
  Tensor staged =
      Tensor::zeros(Shape{count}, DType::F32, std::make_shared<BorrowedAllocator>(host, capacity_, host_));
  if (wire == WireType::F32)
    host_comm.allreduce(staged, op);
  else
    host_comm.allreduce_sum_ordered(staged, wire);

  LS_CUDA_CHECK(cudaMemcpyAsync(device_buf, host, bytes, cudaMemcpyHostToDevice, stream_.get()));
}

}  // namespace lockstep
