// Catch2 runner for the MPI tests: one MpiSession per process; every rank runs
// the same test cases in the same order (they are collective), and the exit
// code is the worst over all ranks. Tests use CHECK, not REQUIRE, so a failure
// on one rank never skips a collective the others are waiting in.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <mpi.h>

#include "comm/mpi_session.h"
#include "mpi_world.h"

namespace lockstep::testing {
namespace {
MpiSession* g_session = nullptr;
}
Communicator& world() {
  static std::unique_ptr<Communicator> comm = g_session->world();
  return *comm;
}
}  // namespace lockstep::testing

int main(int argc, char** argv) {
  lockstep::MpiSession session(&argc, &argv);
  lockstep::testing::g_session = &session;
  const int rc = Catch::Session().run(argc, argv);
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}
