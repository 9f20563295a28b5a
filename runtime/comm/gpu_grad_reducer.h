// GpuGradReducer: the GradReducer for device gradients (comm/grad_reducer.h;
// GPU builds only). Averages a flat gradient buffer in GPU memory over the
// ranks, bucket by bucket, for DistributedOptimizer when the parameters live
// on a GPU. The bucket plan is the CPU path's (plan_buckets: backward order,
// cut at parameter boundaries).
//
// Two transports (--comm):
//   nccl    each bucket is all-reduced (ncclAvg) on the NCCL communicator's
//           stream as soon as backward reports it final: the compute stream
//           records an event after the layer's gradient kernels and the
//           communication stream waits on it, so buckets overlap with the
//           rest of backward without the host waiting. finish() makes the
//           compute stream wait for the last bucket (an event), then the host
//           waits, bounded by the timeout and polling NCCL's asynchronous
//           error state, for the *previous* step's collectives: the host runs
//           at most one step ahead, and a lost peer ends the job
//           (ncclCommAbort) instead of hanging it.
//   mpi     staged through pinned host memory and the host Communicator
//           (StagedAllreduce), the whole buffer once per step after backward:
//           how several ranks share one GPU (NCCL refuses that). Summed, so
//           the optimizer scales by 1/N.
//
// Gradient compression (Options::wire fp16 or bf16, --grad-compression):
//   nccl    per bucket, on the communication stream: the fp32 gradients are
//           rounded into a persistent 16-bit buffer, all-reduced in that type
//           (NCCL adds in 16 bits along its ring or tree, as Horovod's fp16
//           compression does) and widened back into the fp32 buffer: half the
//           bytes on the wire.
//   mpi     the host reduction is the CPU path's ordered sum with the wire
//           type (every contribution and the result rounded to 16 bits); the
//           device <-> host copies stay fp32.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/collective_tracker.h"
#include "comm/communicator.h"
#include "comm/grad_reducer.h"
#include "profiling/timeline.h"
#include "tensor/tensor.h"

namespace lockstep {

class GpuGradReducer final : public GradReducer {
 public:
  struct Options {
    bool overlap = true;        // nccl: reduce buckets during backward
    bool average = true;        // false: sum
    WireType wire = WireType::F32;  // 16-bit: gradient compression (see above)
    double timeout_s = 300;     // nccl: limit on waiting for a step's collectives (<= 0: none)
    Timeline* timeline = nullptr;
    CollectiveTracker* tracker = nullptr;
  };

  // `nccl` null: the mpi transport over `host`. `grads`: the flat F32 buffer on gpu's device.
  GpuGradReducer(cuda::Context& gpu, Communicator& host, NcclCommunicator* nccl, Tensor grads,
                 std::vector<Bucket> buckets, Options options);
  ~GpuGradReducer() override;
  GpuGradReducer(const GpuGradReducer&) = delete;
  GpuGradReducer& operator=(const GpuGradReducer&) = delete;

  // Start of the backward pass whose gradients will be reduced.
  void arm() override;
  // Gradients [0, end) are final (queued on the compute stream).
  void ready(int64_t end) override;
  // Every gradient is final: queue what is left; afterwards, work queued on the
  // compute stream sees the reduced gradients.
  void finish() override;
  // The factor the optimizer applies to the reduced gradients (1 when NCCL
  // averaged them, 1/N when they were summed for an average).
  float grad_scale() const override;
  double last_wait_seconds() const override;
  const std::vector<Bucket>& buckets() const override;
  bool overlapping() const override;
  std::string describe() const override;  // "NCCL 2.28.x" or "MPI staged through pinned host memory"
  // Blocks until every queued collective has finished (end of training, before checkpoints).
  void drain() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
