// Host-side reductions of the trainer: metric sums and sync batch norm.
#include "reductions.h"

#include <algorithm>

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
