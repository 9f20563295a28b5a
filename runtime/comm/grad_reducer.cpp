// make_grad_reducer: the one place that picks the gradient reducer for the
// gradients' device.
#include "comm/grad_reducer.h"

#include "comm/bucket_reducer.h"
#include "core/error.h"

#ifdef LOCKSTEP_HAVE_CUDA
#include "comm/gpu_grad_reducer.h"
#endif

namespace lockstep {

std::unique_ptr<GradReducer> make_grad_reducer(Communicator& comm, GradReducerSetup s) {
  if (s.grads.device().is_cuda()) {
#ifdef LOCKSTEP_HAVE_CUDA
    LS_CHECK(s.gpu != nullptr, "gradient reducer: gradients on {} but no device context", s.grads.device().str());
    LS_CHECK(!s.shm && !s.scatter_only, "gradient reducer: shared memory and ZeRO-1 are host-gradient options");
    return std::make_unique<GpuGradReducer>(
        *s.gpu, comm, s.nccl, std::move(s.grads), std::move(s.buckets),
        GpuGradReducer::Options{s.overlap, s.average, s.wire, s.timeout_s, s.timeline, s.tracker});
#else
    LS_THROW("gradient reducer: gradients on {} need a build with CUDA support", s.grads.device().str());
#endif
  }
  return std::make_unique<BucketReducer>(
      comm, std::move(s.grads), std::move(s.buckets),
      BucketReducer::Options{s.overlap, s.average, s.wire, s.timeline, s.shm, s.tracker, s.scatter_only});
}

}  // namespace lockstep
