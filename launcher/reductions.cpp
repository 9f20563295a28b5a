// Host-side reductions of the trainer: metric sums.
#include "reductions.h"

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

}  // namespace lockstep
