// DistributedOptimizer: wraps any Optimizer so that every rank applies the
// same update: gradients are reduced over ranks (summed by the communicator,
// averaged by passing 1/N into the optimizer's own pass), then the wrapped
// optimizer steps. Also broadcasts rank 0's parameters and optimizer state at
// start and on resume.
//
// Gradients are reduced in buckets: contiguous slices of the flat gradient
// buffer in backward order (the last layer's gradients first), cut at
// parameter boundaries. As in DDP, a bucket closes once it holds at least its
// cap: `first_bucket_bytes` for the first (so communication starts early),
// `bucket_bytes` for the others (a bucket overshoots its cap by at most its
// last parameter). The plan is a pure function of the layout and identical on
// every rank. The buckets go through a GradReducer (comm/grad_reducer.h),
// made by make_grad_reducer for the parameters' device: with overlap, the
// grad-ready hook of the last backward before step() hands each bucket to the
// reducer as soon as its gradients are final. Host parameters: BucketReducer
// (a communication thread, the order-fixed MPI sum or shared memory). GPU
// parameters: GpuGradReducer -- NCCL on a communication stream ordered by
// events (options.nccl), or staged through pinned host memory over MPI
// (options.nccl null: --comm mpi). State broadcasts stage through the host.
//
// GPU (options.device_step): after the average and before the update, the
// device step's rule runs on the device (optim/step_rule.h): with fp16 the
// gradients are checked for inf/NaN and the loss-scale rule decides whether
// the update applies.
//
// Clipping (options.max_grad_norm > 0, optim/grad_clip.h): after the average,
// the averaged gradient's global L2 norm; above the limit, the update's
// gradient factor shrinks by max / (norm + 1e-6). On the host here; on the
// GPU in the device step's rule, which must then be configured with the same
// limit.
//
// ZeRO-1 (options.zero_stage 1, host parameters): the optimizer is sharded.
// Each bucket is only reduce-scattered (comm/ownership.h says which rank sums
// which elements); each rank updates the elements it summed, with optimizer
// state for those alone (1/N of it), and then the updated parameters are
// allgathered, through shared memory when the ranks share a host. The sums,
// the elementwise update and so the parameters are bitwise those of stage 0
// (with clipping, the norm adds the ranks' partial sums in rank order: equal
// on every rank, within rounding of stage 0's). The bytes moved are the
// same: an allreduce is a reduce-scatter and an allgather. With
// options.gather_during_forward (and overlap), step() returns with the
// allgather under way on a communication thread, in forward order
// (comm/parameter_gather.h): the caller must call wait_parameters(from)
// before reading parameters at offsets >= from -- a Sequential's
// parameter-wait hook does it layer by layer -- and wait_parameters() before
// reading them otherwise (checkpoints, checksums). The values are the same.
//
// Use per step:  begin_backward(last) before each backward (last = the
// micro-batch whose gradients are reduced), on_gradients_ready from the
// Sequential's grad-ready hook, step(lr) after the last backward.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/grad_reducer.h"
#include "comm/parameter_gather.h"
#include "comm/shm_allreduce.h"
#include "optim/optimizer.h"

namespace lockstep {

class DeviceStep;  // optim/device_step.h

struct DistributedOptions {
  bool average = true;                          // false: sum the gradients
  int64_t bucket_bytes = int64_t{25} << 20;
  int64_t first_bucket_bytes = int64_t{1} << 20;
  bool overlap = true;                          // reduce buckets during backward
  WireType wire = WireType::F32;                // gradient compression on the wire
  bool shared_memory = true;                    // ranks on one host sum through shared memory (fp32)
  Timeline* timeline = nullptr;
  CollectiveTracker* tracker = nullptr;         // not owned; buckets and handoffs are reported to it
  // Parameters on a GPU: the rank's device context, and the NCCL communicator
  // (null: --comm mpi, staged through host memory), handed to
  // make_grad_reducer. Neither owned.
  cuda::Context* gpu = nullptr;
  NcclCommunicator* nccl = nullptr;
  double timeout_s = 300;                       // GPU: limit on waiting for a step's collectives
  // GPU: the step's device-side state and rule (optim/device_step.h), run
  // before each update: fp16's inf/NaN check and loss scale, clipping, a
  // captured graph's scalars. Not owned.
  DeviceStep* device_step = nullptr;
  float max_grad_norm = 0.f;                    // > 0: clip the averaged gradient to this global L2 norm
  int zero_stage = 0;                           // 1: shard the optimizer state over the ranks (host only)
  // ZeRO-1 with overlap: step() leaves the parameter allgather running for
  // the next forward to wait on, range by range (see wait_parameters).
  bool gather_during_forward = false;
};

// Buckets over a parameter store (pure function of the layout and the caps; a
// first cap <= 0 means the same cap for every bucket).
std::vector<Bucket> plan_buckets(const ParameterStore& params, int64_t bucket_bytes, int64_t first_bucket_bytes = 0);

class DistributedOptimizer {
 public:
  // Collective: every rank constructs it at the same point (with shared memory
  // it maps the host's gradient buffers together and moves this rank's
  // gradients into its block). ZeRO-1: each rank keeps its shard of rank 0's
  // optimizer state (so load a checkpoint into rank 0's optimizer first).
  DistributedOptimizer(Optimizer& opt, ParameterStore& params, Communicator& comm, DistributedOptions options = {});

  // Every rank gets rank `root`'s parameters, optimizer state and step count
  // (ZeRO-1: the state was sharded from rank 0 at construction; root 0 only).
  void broadcast_state(int root = 0);
  // The optimizer state in the whole flat layout: unsharded, state() itself
  // on every rank; with ZeRO-1 assembled from every rank's shard, a bucket
  // at a time, on rank `root` only (collective: every rank calls it; the
  // others get nothing).
  std::vector<std::pair<std::string, Tensor>> gather_state(int root = 0);
  // Before each backward: `last` is true for the backward whose gradients
  // step() reduces (with accumulation, only the K-th).
  void begin_backward(bool last);
  // From the grad-ready hook: gradients [0, end) of the flat buffer are final.
  void on_gradients_ready(int64_t end);
  // Reduce gradients over ranks (waiting for buckets already under way), then
  // apply one update with learning rate `lr`.
  void step(float lr);
  // ZeRO-1 with gather_during_forward: returns once every parameter at flat
  // offset >= `from` holds this step's value (the whole store for 0).
  // Immediate otherwise. Rethrows an error of the gather.
  void wait_parameters(int64_t from = 0) {
    if (gather_) gather_->wait_from(from);
  }

  const std::vector<Bucket>& buckets() const { return reducer_->buckets(); }
  // Seconds the last step() waited for communication (exposed communication);
  // ZeRO-1 adds the parameter allgather's, waited since the step before
  // (in the forward with gather_during_forward, else in step()).
  double last_comm_wait_seconds() const {
    return reducer_->last_wait_seconds() + last_gather_wait_;
  }
  // Host parameters with clipping: the last step's gradient norm before
  // clipping (of the averaged gradient), and the steps clipped so far. On the
  // GPU both live in the device step's state.
  float last_grad_norm() const { return last_grad_norm_; }
  int64_t clipped_steps() const { return clipped_steps_; }
  // GPU: blocks until every queued collective has finished (bounded by the timeout).
  void drain();
  std::string describe() const;
  bool shared_memory() const { return shm_ != nullptr; }
  bool sharded() const { return opt_.sharded(); }
  Optimizer& optimizer() { return opt_; }

 private:
  Optimizer& opt_;
  ParameterStore& params_;
  Communicator& comm_;
  DistributedOptions options_;
  // ZeRO-1: rank 0's optimizer state, each rank keeping the part it owns.
  void scatter_state(const std::vector<Bucket>& plan);
  // ZeRO-1: f(packed, in_bucket, n) for each part of this rank's owned
  // elements inside bucket b: n elements at `packed` in the packed state,
  // at `in_bucket` from the bucket's start.
  template <typename F>
  void for_each_owned_in(const Bucket& b, F&& f) const;
  // ZeRO-1: partial sums of squares over the owned elements, added over ranks in rank order.
  double sharded_sum_of_squares();

  std::unique_ptr<ShmAllreduce> shm_;  // before reducer_, which points at it
  std::unique_ptr<ShmAllreduce> param_shm_;  // ZeRO-1 on one host: the parameters, shared
  std::unique_ptr<GradReducer> reducer_;     // for the parameters' device (make_grad_reducer)
  std::unique_ptr<ParameterGather> gather_;      // ZeRO-1: after param_shm_, which it points at
  double last_gather_wait_ = 0;
  float last_grad_norm_ = 0.f;
  int64_t clipped_steps_ = 0;
};

}  // namespace lockstep
