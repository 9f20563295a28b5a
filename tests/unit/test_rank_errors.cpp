// How the ranks' errors are reported (launcher/rank_errors.h): each error once,
// the ranks named unless every rank hit it, figures that differ between ranks
// not splitting one error into many lines.
#include <catch2/catch.hpp>

#include "rank_errors.h"

using namespace lockstep;

TEST_CASE("one error on every rank is one line without ranks", "[rank_errors]") {
  const std::vector<RankOutcome> all(4, RankOutcome{2, "--data: no such file"});
  CHECK(rank_error_lines(all) == std::vector<std::string>{"--data: no such file"});
  CHECK(job_exit_code(all) == 2);
}

TEST_CASE("one process prints its message alone", "[rank_errors]") {
  CHECK(rank_error_lines({{1, "boom 3"}}) == std::vector<std::string>{"boom 3"});
  CHECK(rank_error_lines({{0, ""}}).empty());
  CHECK(job_exit_code({{0, ""}}) == 0);
}

TEST_CASE("errors of some ranks name them, in order of their lowest rank", "[rank_errors]") {
  const std::vector<RankOutcome> by_rank = {
      {0, ""}, {2, "bad file a.idx"}, {1, "internal: x"}, {2, "bad file a.idx"}, {0, ""}};
  CHECK(rank_error_lines(by_rank) ==
        std::vector<std::string>{"[rank 1,3 of 5] bad file a.idx", "[rank 2 of 5] internal: x"});
  CHECK(job_exit_code(by_rank) == 2);
}

TEST_CASE("messages that differ only in figures are one error with the lowest rank's figures", "[rank_errors]") {
  const std::vector<RankOutcome> every = {{2, "out of host memory for a tensor (28305 MiB), with 21865 MiB available"},
                                          {2, "out of host memory for a tensor (28305 MiB), with 21972 MiB available"},
                                          {2, "out of host memory for a tensor (28305 MiB), with 9 MiB available"}};
  CHECK(rank_error_lines(every) ==
        std::vector<std::string>{"[every rank, figures of rank 0] out of host memory for a tensor (28305 MiB), with "
                                 "21865 MiB available"});
  const std::vector<RankOutcome> some = {{0, ""}, {2, "short by 10 MiB"}, {2, "short by 12 MiB"}, {2, "short by 10 MiB"}};
  CHECK(rank_error_lines(some) == std::vector<std::string>{"[rank 1-3 of 4, figures of rank 1] short by 10 MiB"});
  // Digits and words differ: two errors.
  CHECK(rank_error_lines({{2, "file a1 missing"}, {2, "file b1 missing"}}).size() == 2);
}
