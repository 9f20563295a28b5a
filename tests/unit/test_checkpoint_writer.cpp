// CheckpointWriter (checkpoint/checkpoint_writer.h): a background write is the
// bytes of a synchronous one; the state is copied at save(), so training that
// goes on cannot change the file; a write that fails is an outcome, never an
// exception, and leaves the directory as it was; the destructor waits.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_writer.h"
#include "core/input_subject.h"
#include "registry.h"
#include "optim/optimizer.h"
#include "temp_dir.h"

using namespace lockstep;

namespace {

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

struct Setup {
  std::unique_ptr<Model> model = models::build_model("mlp", models::ModelSpec{Shape{1, 28, 28}, 10}, 1);
  std::unique_ptr<Optimizer> opt = make_optimizer(model->params(), OptimizerConfig{});
  CheckpointInfo info;
  Setup() {
    info.progress = {10, 0, 10};
    info.global_batch = 32;
    info.config_json = "{}";
  }
};

}  // namespace

TEST_CASE("checkpoint writer: a background write is the synchronous write's bytes, from the state at save()",
          "[checkpoint]") {
  testing::TempDir a, b;
  Setup s;
  const std::string sync_path = save_checkpoint(a.path().string(), *s.model, *s.opt, s.info, 2);
  const std::string expected = bytes_of(sync_path);
  CheckpointWriter w(/*background=*/true);
  w.save(b.path().string(), *s.model, *s.opt, s.info, 2, s.opt->state());
  s.model->params().values().fill(7.f);  // training goes on while the file is written
  w.wait();
  const std::vector<CheckpointOutcome> done = w.take();
  REQUIRE(done.size() == 1);
  CHECK(done[0].ok());
  CHECK(done[0].step == 10);
  CHECK(bytes_of(done[0].path) == expected);
  CHECK(w.take().empty());  // each outcome once

  // The next save waits for nothing and reuses the staging tensors.
  s.info.progress = {20, 0, 20};
  w.save(b.path().string(), *s.model, *s.opt, s.info, 2, s.opt->state());
  w.wait();
  const std::vector<CheckpointOutcome> next = w.take();
  REQUIRE(next.size() == 1);
  CHECK(next[0].ok());
  CHECK(bytes_of(next[0].path) != expected);  // the filled parameters this time
}

TEST_CASE("checkpoint writer: a failed write is an outcome naming the directory, the directory untouched",
          "[checkpoint]") {
  testing::TempDir d;
  Setup s;
  const std::string not_a_dir = d.file("plain-file");
  std::ofstream(not_a_dir) << "x";
  for (bool background : {true, false}) {
    CheckpointWriter w(background);
    w.save(not_a_dir, *s.model, *s.opt, s.info, 2, s.opt->state());
    w.wait();
    const std::vector<CheckpointOutcome> done = w.take();
    REQUIRE(done.size() == 1);
    CHECK_FALSE(done[0].ok());
    CHECK(done[0].subject == subject::kCheckpointDirectory);
    CHECK(done[0].error.rfind(subject::kCheckpointDirectory, 0) == 0);
    CHECK(bytes_of(not_a_dir) == "x");
  }
}

TEST_CASE("checkpoint writer: the destructor waits for the write in flight", "[checkpoint]") {
  testing::TempDir d;
  Setup s;
  {
    CheckpointWriter w(/*background=*/true);
    w.save(d.path().string(), *s.model, *s.opt, s.info, 2, s.opt->state());
  }
  const std::vector<std::string> files = list_checkpoints(d.path().string());
  REQUIRE(files.size() == 1);
  CHECK(d.entries().size() == 1);  // no temporary beside it
}
