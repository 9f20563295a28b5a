// ParameterGather: ZeRO-1's second half. After each rank has updated the
// parameters it owns (comm/ownership.h), every owner's elements go to every
// rank: Communicator::allgather_owned over messages, ShmAllreduce::allgather
// through shared memory.
//
// The parameters are gathered in ranges: each reduce-scatter bucket cut into
// pieces of kGatherSegments ownership segments from the bucket's start (so a
// piece's ownership is the bucket's), listed from the highest offset down.
// The store lays parameters out in reverse, so that is forward order: the
// first layer's parameters come first.
//
// With overlap, start() hands the ranges to a communication thread (an
// OrderedWorker on its own duplicate of the communicator) and returns at once; wait_from(offset)
// blocks until every parameter at or above `offset` has arrived. A forward
// pass that calls it before each layer (Sequential's parameter-wait hook)
// runs its first layers while the later layers' parameters are still on the
// wire, as FSDP's forward prefetch and DeepSpeed's overlap_comm do. Without
// overlap, start() gathers everything on the calling thread before it returns.
// The ranges, their order and so every byte moved are the same either way.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/collective_tracker.h"
#include "comm/communicator.h"
#include "comm/ordered_worker.h"
#include "comm/ownership.h"
#include "comm/shm_allreduce.h"
#include "profiling/timeline.h"

namespace lockstep {

class ParameterGather {
 public:
  // Ownership segments per gathered range (1 MiB of fp32 each): small enough
  // that the first layers need not wait for a whole 25 MB bucket, large
  // enough to keep per-call costs small. Not tuned.
  static constexpr int64_t kGatherSegments = 4;

  struct Options {
    bool overlap = true;                   // gather on a communication thread
    Timeline* timeline = nullptr;          // not owned; may be null
    CollectiveTracker* tracker = nullptr;  // not owned; may be null: each range is reported to it
    ShmAllreduce* shm = nullptr;           // not owned; when set, `values` is this rank's shared block
  };

  // `buckets`: the reduce-scatter's calls, in increasing order, covering `values`.
  ParameterGather(Communicator& comm, Tensor values, const std::vector<ElementRange>& buckets, Options options);
  // Finishes a gather under way (every rank does, so none is left waiting),
  // unless the communication thread has failed.
  ~ParameterGather();
  ParameterGather(const ParameterGather&) = delete;
  ParameterGather& operator=(const ParameterGather&) = delete;

  // This rank's owned parameters are final: gather everyone's. The previous
  // gather must be complete (wait()).
  void start();
  // Returns once every parameter at offset >= `offset` has been gathered.
  // Rethrows an error from the communication thread.
  void wait_from(int64_t offset);
  void wait() { wait_from(0); }
  // Seconds the calling thread spent gathering or waiting since the last call.
  double take_wait_seconds();
  bool overlapping() const { return worker_ != nullptr; }
  // The ranges in gather order (forward order), for tests and logs.
  const std::vector<ElementRange>& ranges() const { return ranges_; }

 private:
  void gather(size_t r, Communicator& comm);  // one range

  Communicator& comm_;
  std::unique_ptr<Communicator> thread_comm_;
  Tensor values_;
  std::vector<ElementRange> ranges_;
  Options options_;
  std::mutex wait_mu_;  // waited_: the caller's thread and take_wait_seconds()
  double waited_ = 0;
  std::unique_ptr<OrderedWorker> worker_;  // with overlap; last: joined before the rest goes
};

}  // namespace lockstep
