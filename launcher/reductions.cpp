// Host-side reductions of the trainer: metric sums and sync batch norm.
#include "reductions.h"

#include <algorithm>

#ifdef LOCKSTEP_HAVE_CUDA
#include "comm/nccl_communicator.h"
#include "cuda/context.h"
#include "cuda/stream.h"
#endif

namespace lockstep {

void Sums::add(const LossStats& s) {
  loss += s.loss_sum;
  correct += static_cast<double>(s.correct);
  count += static_cast<double>(s.count);
}

Sums Sums::reduced(Communicator& comm, CollectiveTracker& tracker, CollectiveKind kind) const {
  CollectiveScope scope(&tracker, kind);
  Tensor t = Tensor::zeros(Shape{3}, DType::F64);
  double* p = t.data<double>();
  p[0] = loss;
  p[1] = correct;
  p[2] = count;
  comm.allreduce(t, ReduceOp::Sum);
  return {p[0], p[1], p[2]};
}

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
