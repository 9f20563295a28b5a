// launcher/input_names.h: the runtime's input errors read with the trainer's
// flags, and the variable named when one set the input.
#include <catch2/catch.hpp>

#include <functional>

#include "core/input_subject.h"
#include "data/mnist.h"
#include "input_names.h"
#include "optim/schedule.h"
#include "temp_dir.h"

using namespace lockstep;
using lockstep::testing::TempDir;

namespace {

InputError caught(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e;
  }
  FAIL("no input error");
  return InputError(__FILE__, __LINE__, "");  // not reached: FAIL ends the test case
}

}  // namespace

TEST_CASE("runtime input errors name the runtime's concept, and the trainer puts its flag there", "[trainer][errors]") {
  TempDir base;
  const std::string nope = base.file("nope");
  const InputError e = caught([&] { load_mnist_format(nope, "mnist-format"); });
  CHECK(e.subject() == subject::kDataDirectory);
  CHECK(e.message() == "data directory " + nope + ": not a directory");
  CHECK(e.message().find("--") == std::string::npos);

  TrainConfig c;
  CHECK(user_message(e, c) == "--data-dir " + nope + ": not a directory");
  c.settings.push_back({"data-dir", nope, "LOCKSTEP_DATA_DIR"});
  CHECK(user_message(e, c) == "--data-dir " + nope + ": not a directory (set by LOCKSTEP_DATA_DIR)");
  c.settings.back().source = "command line";
  CHECK(user_message(e, c) == "--data-dir " + nope + ": not a directory");
}

TEST_CASE("every runtime input subject has a trainer flag, and messages without one stay as they are", "[trainer][errors]") {
  for (const char* s : {subject::kDataDirectory, subject::kCheckpointDirectory, subject::kResume,
                        subject::kTimelineFile, subject::kLearningRate, subject::kLrSchedule, subject::kLrGamma,
                        subject::kMomentum, subject::kLossScale, subject::kLossScaleWindow, subject::kMaxGradNorm,
                        subject::kZeroStage, subject::kGpuDevice, subject::kNcclTransport, subject::kCudaGraphs})
    CHECK(flag_for_subject(s).rfind("--", 0) == 0);
  CHECK(flag_for_subject("something else").empty());

  LrSchedule bad;
  bad.base_lr = -1.f;
  const InputError e = caught([&] { bad.validate(); });
  CHECK(e.subject() == subject::kLearningRate);
  CHECK(user_message(e, TrainConfig{}) == "--lr -1 must be a positive number");

  const InputError plain(__FILE__, __LINE__, "--batch-size: 0 must be positive");
  CHECK(plain.subject().empty());
  CHECK(user_message(plain, TrainConfig{}) == plain.message());
}
