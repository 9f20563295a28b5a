// StagedAllreduce: allreduce of GPU buffers through host memory and the host
// Communicator (MPI), for --comm mpi: several ranks sharing one GPU, where
// NCCL refuses two ranks on one device.
//
// One call: the copy stream waits on `ready` (recorded by the caller on its
// compute stream after producing the buffer), copies device -> pinned host
// memory, the host waits for that copy, the host Communicator reduces the
// pinned copy in place, and the result is copied back asynchronously on the
// copy stream. record_done() then gives the compute stream an event to wait
// on before it reads the buffer.
//
// The pinned buffer is owned here, grows as needed and persists across calls
// (MPI never sees fresh, untouched pages). Reuse is safe without extra
// synchronisation: the next call's device -> host copy is stream-ordered after
// the previous host -> device copy, and the host only writes the buffer after
// waiting for it. Not thread-safe: one thread drives an instance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "comm/communicator.h"
#include "cuda/caching_allocator.h"
#include "cuda/stream.h"

namespace lockstep {

class StagedAllreduce {
 public:
  StagedAllreduce();  // on the current device
  ~StagedAllreduce();  // waits for the copy stream, then frees the pinned buffer
  StagedAllreduce(const StagedAllreduce&) = delete;
  StagedAllreduce& operator=(const StagedAllreduce&) = delete;

  // In place over the ranks of `host_comm`: `count` F32 elements at
  // `device_buf`. Blocks the host for the device -> host copy and the MPI
  // collective; the copy back is left queued (see record_done). With a 16-bit
  // `wire` (op must be Sum) the host sum is Communicator::allreduce_sum_ordered:
  // contributions and result rounded to the wire type, exactly as on the CPU
  // path's --grad-compression.
  void allreduce(Communicator& host_comm, void* device_buf, int64_t count, ReduceOp op, const cuda::Event* ready,
                 WireType wire = WireType::F32);
  // Records `e` on the copy stream: the result is in device memory when `e` is.
  void record_done(const cuda::Event& e) const { e.record(stream_); }
  // Blocks until the queued copy back has finished.
  void synchronize() const { stream_.synchronize(); }

  const cuda::Stream& stream() const { return stream_; }
  size_t capacity_bytes() const { return capacity_; }
  int device() const { return device_; }

 private:
  void reserve(size_t bytes);

  int device_ = 0;
  cuda::Stream stream_;
  std::shared_ptr<cuda::PinnedAllocator> pinned_;
  std::shared_ptr<void> host_;  // the pinned block (freed through pinned_)
  size_t capacity_ = 0;
};

}  // namespace lockstep
