// BucketReducer: sums a flat gradient buffer over ranks, bucket by bucket,
// in place (the buffer is the fusion buffer: no pack or unpack copies).
//
// With overlap, a communication thread reduces each bucket as soon as
// backward reports that all of its gradients are final, while backward goes on
// with earlier layers; finish() hands over whatever is left and waits. Without
// overlap, finish() reduces every bucket on the calling thread. Either way the
// buckets are reduced in order with Communicator::allreduce_sum_ordered, so the
// sums are bitwise the same with overlap on or off and for any bucket plan.
// The communication thread uses its own duplicate of the communicator.
#pragma once

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/collective_tracker.h"
#include "comm/communicator.h"
#include "comm/ownership.h"
#include "comm/shm_allreduce.h"
#include "profiling/timeline.h"

namespace lockstep {

// Elements [begin, end) of the flat gradient buffer.
using Bucket = ElementRange;

class BucketReducer {
 public:
  struct Options {
    bool overlap = true;
    WireType wire = WireType::F32;
    Timeline* timeline = nullptr;  // not owned; may be null
    ShmAllreduce* shm = nullptr;   // not owned; when set (fp32 only), buckets are summed through shared memory
    CollectiveTracker* tracker = nullptr;  // not owned; may be null: each bucket and handoff is reported to it
    // ZeRO-1: each bucket is only reduce-scattered (comm/ownership.h): the
    // sums land in the elements this rank owns, which are all its sharded
    // optimizer updates.
    bool scatter_only = false;
  };

  BucketReducer(Communicator& comm, Tensor grads, std::vector<Bucket> buckets, Options options);
  ~BucketReducer();
  BucketReducer(const BucketReducer&) = delete;
  BucketReducer& operator=(const BucketReducer&) = delete;

  // Before any backward writes gradients: waits until the other ranks have
  // finished reading this rank's gradients of the last step (shared memory only).
  void quiesce();
  // Start of the backward pass whose gradients will be reduced.
  void arm();
  // Gradients [0, end) are final: hand every complete bucket to the thread.
  void ready(int64_t end);
  // All gradients final: reduce what is left and wait until every bucket is
  // done (with shared memory, also until the other ranks have read this
  // rank's gradients). Rethrows an error from the communication thread.
  void finish();
  // Seconds the last finish() waited for communication (exposed communication).
  double last_wait_seconds() const { return last_wait_; }
  bool overlapping() const { return options_.overlap && thread_.joinable(); }
  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  void reduce(size_t b, Communicator& comm);  // one bucket
  void run();                                  // the communication thread

  Communicator& comm_;
  std::unique_ptr<Communicator> thread_comm_;
  Tensor grads_;
  std::vector<Bucket> buckets_;
  Options options_;

  std::mutex mu_;
  std::condition_variable cv_;
  size_t launched_ = 0;   // buckets handed to the thread
  size_t done_ = 0;       // buckets reduced
  bool armed_ = false, stop_ = false;
  std::exception_ptr error_;
  double last_wait_ = 0;
  std::thread thread_;
};

}  // namespace lockstep
