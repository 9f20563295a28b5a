// BucketReducer: the GradReducer for host gradients (comm/grad_reducer.h).
// Sums a flat gradient buffer over ranks, bucket by bucket, in place (the
// buffer is the fusion buffer: no pack or unpack copies).
//
// With overlap, a communication thread (an OrderedWorker) reduces each bucket as soon as
// backward reports that all of its gradients are final, while backward goes on
// with earlier layers; finish() hands over whatever is left and waits. Without
// overlap, finish() reduces every bucket on the calling thread. Either way the
// buckets are reduced in order with Communicator::allreduce_sum_ordered, so the
// sums are bitwise the same with overlap on or off and for any bucket plan.
// The communication thread uses its own duplicate of the communicator.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/collective_tracker.h"
#include "comm/communicator.h"
#include "comm/grad_reducer.h"
#include "comm/ordered_worker.h"
#include "comm/ownership.h"
#include "comm/shm_allreduce.h"
#include "profiling/timeline.h"

namespace lockstep {

class BucketReducer final : public GradReducer {
 public:
  struct Options {
    bool overlap = true;
    bool average = true;  // grad_scale() 1/N; false: 1 (a sum)
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
  ~BucketReducer() override;
  BucketReducer(const BucketReducer&) = delete;
  BucketReducer& operator=(const BucketReducer&) = delete;

  // Before any backward writes gradients: waits until the other ranks have
  // finished reading this rank's gradients of the last step (shared memory only).
  void quiesce() override;
  // Start of the backward pass whose gradients will be reduced.
  void arm() override;
  // Gradients [0, end) are final: hand every complete bucket to the thread.
  void ready(int64_t end) override;
  // All gradients final: reduce what is left and wait until every bucket is
  // done (with shared memory, also until the other ranks have read this
  // rank's gradients). Rethrows an error from the communication thread.
  void finish() override;
  float grad_scale() const override;
  double last_wait_seconds() const override { return last_wait_; }
  bool overlapping() const override { return worker_ != nullptr; }
  const std::vector<Bucket>& buckets() const override { return buckets_; }
  std::string describe() const override;

 private:
  void reduce(size_t b, Communicator& comm);  // one bucket

  Communicator& comm_;
  std::unique_ptr<Communicator> thread_comm_;
  Tensor grads_;
  std::vector<Bucket> buckets_;
  Options options_;
  bool armed_ = false;  // a backward is under way whose buckets go to the worker
  double last_wait_ = 0;
  std::unique_ptr<OrderedWorker> worker_;  // with overlap; last: joined before the rest goes
};

}  // namespace lockstep
