// launcher/step_cadence.h: what runs between steps, from counters every rank shares.
#include <catch2/catch.hpp>

#include "step_cadence.h"

using namespace lockstep;

TEST_CASE("StepCadence: checkpoints every N steps, at each epoch's end and at the last step", "[trainer][cadence]") {
  TrainConfig c;
  c.checkpoint_every = 4;
  const StepCadence cadence(c, 0, 10);
  CHECK_FALSE(cadence.after(1, false).checkpoint);
  CHECK(cadence.after(4, false).checkpoint);
  CHECK(cadence.after(8, false).checkpoint);
  CHECK(cadence.after(5, true).checkpoint);   // an epoch's end
  CHECK(cadence.after(10, false).checkpoint);  // the last step
  c.checkpoint_every = 0;
  const StepCadence epochs_only(c, 0, 10);
  CHECK_FALSE(epochs_only.after(4, false).checkpoint);
  CHECK(epochs_only.after(3, true).checkpoint);
}

TEST_CASE("StepCadence: the replica check every N steps, none when off", "[trainer][cadence]") {
  TrainConfig c;
  c.check_replicas_every = 3;
  const StepCadence cadence(c, 1, 100);
  CHECK_FALSE(cadence.after(2, false).replica_check);
  CHECK(cadence.after(3, false).replica_check);
  CHECK(cadence.after(6, true).replica_check);
  c.check_replicas_every = 0;
  CHECK_FALSE(StepCadence(c, 1, 100).after(3, false).replica_check);
}

TEST_CASE("StepCadence: an injected fault on its rank after its step only", "[trainer][cadence]") {
  TrainConfig c;
  c.inject_kind = "replica-drift";
  c.inject_rank = 2;
  c.inject_step = 5;
  CHECK(StepCadence(c, 2, 10).after(5, false).fault == StepCadence::Fault::ReplicaDrift);
  CHECK(StepCadence(c, 2, 10).after(4, false).fault == StepCadence::Fault::None);
  CHECK(StepCadence(c, 1, 10).after(5, false).fault == StepCadence::Fault::None);  // another rank
  c.inject_kind = "error";
  c.inject_every_rank = true;
  CHECK(StepCadence(c, 0, 10).after(5, false).fault == StepCadence::Fault::Error);
  CHECK(StepCadence(c, 3, 10).after(5, false).fault == StepCadence::Fault::Error);
  c.inject_kind.clear();  // no --inject-fault
  CHECK(StepCadence(c, 0, 10).after(5, false).fault == StepCadence::Fault::None);
}
