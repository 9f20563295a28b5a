// StepCadence: the between-steps schedule.
#include "step_cadence.h"

namespace lockstep {

StepCadence::StepCadence(const TrainConfig& c, int rank, int64_t total_steps)
    : checkpoint_every_(c.checkpoint_every), check_replicas_every_(c.check_replicas_every), total_steps_(total_steps) {
  if ((c.inject_every_rank || c.inject_rank == rank) && !c.inject_kind.empty()) {
    fault_ = c.inject_kind == "error" ? Fault::Error : c.inject_kind == "replica-drift" ? Fault::ReplicaDrift
                                                                                        : Fault::None;
    fault_step_ = c.inject_step;
  }
}

StepCadence::Due StepCadence::after(int64_t step, bool epoch_end) const {
  Due d;
  if (fault_ != Fault::None && step == fault_step_) d.fault = fault_;
  d.replica_check = check_replicas_every_ > 0 && step % check_replicas_every_ == 0;
  d.checkpoint = (checkpoint_every_ > 0 && step % checkpoint_every_ == 0) || epoch_end || step == total_steps_;
  return d;
}

}  // namespace lockstep
