// CommStatsReducer: host sums over the communicator, device sums through NCCL.
#include "comm/stats_reducer.h"

#include <algorithm>

#ifdef LOCKSTEP_HAVE_CUDA
#include "comm/nccl_communicator.h"
#include "cuda/context.h"
#include "cuda/stream.h"
#endif

namespace lockstep {

#ifdef LOCKSTEP_HAVE_CUDA
struct CommStatsReducer::Events {
  cuda::Event ready, done;
};

CommStatsReducer::CommStatsReducer(Communicator& comm, CollectiveTracker& tracker, NcclCommunicator* nccl)
    : comm_(comm), tracker_(tracker), nccl_(nccl) {
  if (nccl_) events_ = std::make_unique<Events>();
}

bool CommStatsReducer::sum_on_device(cuda::Context& gpu, double* values, int64_t n) {
  if (!nccl_) return false;
  CollectiveScope scope(&tracker_, CollectiveKind::BatchNormSync);
  // An event may be recorded again once the waits on its previous record are
  // queued: cudaStreamWaitEvent takes the record current at the call.
  events_->ready.record(gpu.stream());
  nccl_->allreduce(values, n, DType::F64, ReduceOp::Sum, &events_->ready);
  nccl_->record_done(events_->done);
  events_->done.wait_on(gpu.stream());
  return true;
}
#else
struct CommStatsReducer::Events {};

CommStatsReducer::CommStatsReducer(Communicator& comm, CollectiveTracker& tracker, NcclCommunicator* nccl)
    : comm_(comm), tracker_(tracker), nccl_(nccl) {}

bool CommStatsReducer::sum_on_device(cuda::Context&, double*, int64_t) { return false; }
#endif

CommStatsReducer::~CommStatsReducer() = default;

void CommStatsReducer::sum(double* values, int64_t n) {
  if (buf_.numel() < n) buf_ = Tensor::zeros(Shape{n}, DType::F64);
  Tensor t = buf_.narrow_rows(n);
  std::copy_n(values, n, t.data<double>());
  {
    CollectiveScope scope(&tracker_, CollectiveKind::BatchNormSync);
    comm_.allreduce(t, ReduceOp::Sum);
  }
  std::copy_n(t.data<double>(), n, values);
}

}  // namespace lockstep
