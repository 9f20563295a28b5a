// lockstep-run's restart decisions (launcher/restart_plan.h): what is retried,
// the next world size with the global batch kept, and the restarted command.
#include <catch2/catch.hpp>

#include "restart_plan.h"

using namespace lockstep;

TEST_CASE("run-time failures are retried, bad input, clean stops and unstartable commands are not", "[restart]") {
  for (int code : {1, 3, 4, 134, 137, 143}) CHECK(retryable(code));
  for (int code : {0, 2, 75, 126, 127}) CHECK_FALSE(retryable(code));
  CHECK(exit_meaning(137) == "killed by signal 9 (SIGKILL)");
  CHECK(exit_meaning(3) == "a collective timeout (watchdog)");
  CHECK(exit_meaning(42) == "exit code 42");
}

TEST_CASE("the next world keeps the global batch, accumulating where ranks are fewer", "[restart]") {
  // 2 hosts x 2 ranks, batch 16 each; host b lost: 2 ranks x 16 x 2 micro-batches.
  WorldChoice w = choose_world(64, 16, 2, 4, 1);
  CHECK(w.np == 2);
  CHECK(w.micro_batch == 16);
  CHECK(w.accumulate == 2);
  // Every slot back: the same split as before.
  w = choose_world(64, 16, 4, 4, 1);
  CHECK((w.np == 4 && w.micro_batch == 16 && w.accumulate == 1));
  // Never more ranks than the job started with.
  w = choose_world(64, 16, 8, 4, 1);
  CHECK(w.np == 4);
  // 3 slots: 64 does not split over 3 ranks, so 2.
  w = choose_world(64, 16, 3, 4, 1);
  CHECK((w.np == 2 && w.accumulate == 2));
  // The micro-batch never grows past the first attempt's: 1 rank x 16 x 4.
  w = choose_world(64, 16, 1, 4, 1);
  CHECK((w.np == 1 && w.micro_batch == 16 && w.accumulate == 4));
  // Below --min-np: none, with the reason.
  w = choose_world(64, 16, 2, 4, 3);
  CHECK(w.np == 0);
  CHECK(w.why == "2 slots left, fewer than --min-np 3");
  // A global batch no world from 3 down to 3 splits.
  w = choose_world(64, 16, 3, 3, 3);
  CHECK(w.np == 0);
  CHECK(w.why.find("splits the global batch of 64") != std::string::npos);
}

TEST_CASE("the restarted command replaces the batch flags and adds --resume once", "[restart]") {
  const std::vector<std::string> in = {"/bin/trainer", "--model", "lenet", "--global-batch-size", "32",
                                       "--accumulate-steps=2", "--resume", "--checkpoint-dir", "/c"};
  const std::vector<std::string> want = {"/bin/trainer", "--model", "lenet", "--checkpoint-dir", "/c",
                                         "--global-batch-size", "64", "--accumulate-steps", "2", "--resume"};
  CHECK(restart_command(in, 64, 2) == want);
  CHECK(names_checkpoint_dir(in, false));
  CHECK(names_checkpoint_dir({"/bin/trainer", "--checkpoint-dir=/c"}, false));
  CHECK_FALSE(names_checkpoint_dir({"/bin/trainer", "--model", "lenet"}, false));
  CHECK(names_checkpoint_dir({"/bin/trainer"}, true));
}
