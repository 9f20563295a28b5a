// The watchdog's diagnosis: which ranks it names, and how, from a table of
// reported positions (the exchange itself runs in faults.frozen_rank and the
// cluster link-cut test).
#include <catch2/catch.hpp>

#include "comm/watchdog.h"

using namespace lockstep;

namespace {
CollectivePosition at(uint64_t seq, int64_t step, CollectiveKind kind, int32_t detail, bool inside) {
  CollectivePosition p;
  p.seq = seq;
  p.step = step;
  p.kind = kind;
  p.detail = detail;
  p.inside = inside;
  return p;
}
const std::vector<std::string> kWhere = {"host a, pid 10", "host a, pid 11", "host b, pid 20", "host b, pid 21"};
}  // namespace

TEST_CASE("rank 0 names the ranks behind it, with host, pid and last position", "[watchdog]") {
  const auto mine = at(50, 12, CollectiveKind::Bucket, 7, true);
  std::vector<CollectivePosition> table = {mine, at(50, 12, CollectiveKind::Bucket, 7, true),
                                           at(47, 11, CollectiveKind::Metrics, 0, false),
                                           at(50, 12, CollectiveKind::Bucket, 7, true)};
  const std::vector<double> ago = {-1, 0.2, 0.3, 0.1};
  const std::string m = Watchdog::diagnose(0, mine, 300.4, table, ago, kWhere, 300);
  CHECK(m.find("rank 2 (host b, pid 20) has not reached step 12 allreduce bucket 7 after 300 s") != std::string::npos);
  CHECK(m.find("last seen at step 11 after metrics reduction, 0.3 s ago") != std::string::npos);
  CHECK(m.find("rank 1") == std::string::npos);
  CHECK(m.find("rank 3") == std::string::npos);
}

TEST_CASE("rank 0 names ranks it has not heard from for the timeout (a cut link)", "[watchdog]") {
  const auto mine = at(9, 3, CollectiveKind::Bucket, 0, true);
  std::vector<CollectivePosition> table = {mine, at(9, 3, CollectiveKind::Bucket, 0, true),
                                           at(9, 3, CollectiveKind::Bucket, 0, true), CollectivePosition{}};
  const std::vector<double> ago = {-1, 0.1, 6.0, 6.0};
  const std::string m = Watchdog::diagnose(0, mine, 5.2, table, ago, kWhere, 5);
  CHECK(m.find("rank 2 (host b, pid 20)") != std::string::npos);
  CHECK(m.find("rank 3 (host b, pid 21) has not reached step 3 allreduce bucket 0 after 5 s; never heard from") !=
        std::string::npos);
  CHECK(m.find("rank 1") == std::string::npos);
}

TEST_CASE("a rank that reached the collective and then went quiet is named (link cut mid-collective)",
          "[watchdog]") {
  const auto mine = at(9, 3, CollectiveKind::Bucket, 0, true);
  std::vector<CollectivePosition> table(4, mine);
  table[3] = at(8, 3, CollectiveKind::StepAgreement, 0, false);
  const std::vector<double> ago = {-1, 0.2, 4.8, 4.9};  // rank 2 reported once more just before the cut
  const std::string m = Watchdog::diagnose(0, mine, 5.0, table, ago, kWhere, 5);
  CHECK(m.find("rank 2 (host b, pid 20) reached step 3 allreduce bucket 0 but has not been heard from for 4.8 s") !=
        std::string::npos);
  CHECK(m.find("rank 3 (host b, pid 21) has not reached step 3 allreduce bucket 0 after 5 s") != std::string::npos);
  CHECK(m.find("rank 1") == std::string::npos);  // heard 0.2 s ago: fine
  // Quiet for less than 2 s is normal jitter, not a culprit.
  const std::vector<double> jitter = {-1, 0.2, 1.5, 0.3};
  CHECK(Watchdog::diagnose(0, at(9, 3, CollectiveKind::Bucket, 0, true), 5.0, std::vector<CollectivePosition>(4, mine),
                           jitter, kWhere, 5)
            .find("every rank reached it") != std::string::npos);
}

TEST_CASE("when everyone arrived, rank 0 says so instead of blaming a rank", "[watchdog]") {
  const auto mine = at(9, 3, CollectiveKind::Bucket, 0, true);
  std::vector<CollectivePosition> table(4, mine);
  const std::vector<double> ago = {-1, 0.1, 0.2, 0.1};
  const std::string m = Watchdog::diagnose(0, mine, 5.2, table, ago, kWhere, 5);
  CHECK(m.find("every rank reached it") != std::string::npos);
}

TEST_CASE("another rank names rank 0 when rank 0 is behind, or says rank 0 went quiet", "[watchdog]") {
  const auto mine = at(9, 3, CollectiveKind::StepAgreement, 0, true);
  std::vector<CollectivePosition> table(4);
  table[0] = at(8, 3, CollectiveKind::Checkpoint, 0, true);
  std::vector<double> ago = {0.2, -1, -1, -1};  // a non-root rank knows only rank 0
  std::string m = Watchdog::diagnose(2, mine, 8.1, table, ago, kWhere, 5);
  CHECK(m.find("rank 0 (host a, pid 10) has not reached step 3 step agreement") != std::string::npos);
  CHECK(m.find("in checkpoint writing") != std::string::npos);
  table[0] = mine;
  ago[0] = 7.5;
  m = Watchdog::diagnose(2, mine, 8.1, table, ago, kWhere, 5);
  CHECK(m.find("rank 0 (host a, pid 10) reached step 3 step agreement but has not been heard from for 7.5 s") !=
        std::string::npos);  // silent for longer than the timeout
  ago[0] = 0.3;
  m = Watchdog::diagnose(2, mine, 8.1, table, ago, kWhere, 5);
  CHECK(m.find("has not completed on rank 2 (host b, pid 20)") != std::string::npos);
  CHECK(m.find("rank 0 did not end the job") != std::string::npos);
}

TEST_CASE("a stop that cannot reach the step boundary says so and names the silent rank", "[watchdog]") {
  const auto mine = at(9, 3, CollectiveKind::Bucket, 0, true);
  std::vector<CollectivePosition> table(2, mine);
  const std::vector<double> ago = {-1, 5.4};  // rank 1 died while in the same collective
  const std::string m = Watchdog::diagnose(0, mine, 5.1, table, ago, {"host a, pid 10", "host a, pid 11"}, 300,
                                           "cannot stop at a step boundary (a stop was requested; a rank is gone)");
  CHECK(m.rfind("cannot stop at a step boundary (a stop was requested; a rank is gone): rank 1 (host a, pid 11) reached "
                "step 3 allreduce bucket 0 but has not been heard from for 5.4 s",
                0) == 0);
}
