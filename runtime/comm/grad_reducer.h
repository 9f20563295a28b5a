// GradReducer: the one interface DistributedOptimizer reduces gradients
// through, whatever the transport. It sums (or averages) the flat gradient
// buffer over the ranks in buckets -- contiguous slices in backward order
// (plan_buckets) -- during backward when it overlaps, after it otherwise:
//   quiesce()   before any backward writes gradients of the next step
//   arm()       at the start of the backward whose gradients are reduced
//   ready(end)  gradients [0, end) are final (the grad-ready hook)
//   finish()    every gradient is final: reduce what is left, wait (host) or
//               order the compute stream after it (GPU); rethrows a failure
//   drain()     every queued collective has finished (end of training, checkpoints)
// grad_scale() is the factor the optimizer applies to the reduced gradients
// (1/N when they were summed for an average, 1 when summed or averaged in
// place).
//
// Two implementations, built by make_grad_reducer from the configuration:
//   BucketReducer   host gradients: the order-fixed MPI allreduce (or
//                   shared memory between ranks of one host, or ZeRO-1's
//                   reduce-scatter), on an OrderedWorker during backward
//   GpuGradReducer  device gradients: NCCL on a communication stream ordered
//                   by events, or staged through pinned host memory over MPI
// NCCL is a transport behind this interface, not a Communicator: the
// Communicator contract is host tensors summed in rank order, bitwise the
// same for every transport and bucket plan, which NCCL's stream-ordered
// ring/tree sums on device memory do not give (docs/design.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/collective_tracker.h"
#include "comm/communicator.h"
#include "comm/ownership.h"
#include "profiling/timeline.h"
#include "tensor/tensor.h"

namespace lockstep {

namespace cuda {
class Context;
}
class NcclCommunicator;
class ShmAllreduce;

// Elements [begin, end) of the flat gradient buffer.
using Bucket = ElementRange;

class GradReducer {
 public:
  virtual ~GradReducer() = default;
  virtual void quiesce() {}
  virtual void arm() = 0;
  virtual void ready(int64_t end) = 0;
  virtual void finish() = 0;
  virtual void drain() {}
  virtual float grad_scale() const = 0;
  // Seconds the last finish() waited for communication (exposed communication).
  virtual double last_wait_seconds() const = 0;
  virtual bool overlapping() const = 0;
  virtual const std::vector<Bucket>& buckets() const = 0;
  // The transport, for the start-up log: "MPI (Open MPI 4.1.4), shared memory", "NCCL 2.28.3", ...
  virtual std::string describe() const = 0;
};

// What make_grad_reducer builds from.
struct GradReducerSetup {
  Tensor grads;                 // the flat F32 gradient buffer: host memory or a GPU's
  std::vector<Bucket> buckets;  // plan_buckets over it
  bool overlap = true;          // reduce buckets during backward
  bool average = true;          // false: sum
  WireType wire = WireType::F32;
  Timeline* timeline = nullptr;          // not owned; may be null
  CollectiveTracker* tracker = nullptr;  // not owned; may be null
  // Host gradients.
  ShmAllreduce* shm = nullptr;  // not owned; when set (fp32), buckets are summed through shared memory
  bool scatter_only = false;    // ZeRO-1: reduce-scatter only (comm/ownership.h)
  // GPU gradients: the rank's device context and NCCL (null: staged over MPI).
  cuda::Context* gpu = nullptr;
  NcclCommunicator* nccl = nullptr;
  double timeout_s = 300;  // limit on waiting for a step's collectives (<= 0: none)
};

// The reducer for `setup.grads`'s device: BucketReducer for host memory,
// GpuGradReducer for a GPU's (which needs setup.gpu). `comm` is the job's
// host communicator (not owned; it must outlive the reducer).
std::unique_ptr<GradReducer> make_grad_reducer(Communicator& comm, GradReducerSetup setup);

}  // namespace lockstep
