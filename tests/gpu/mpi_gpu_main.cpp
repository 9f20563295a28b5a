// Catch2 runner for the GPU collective tests under mpirun (NCCL communicator,
// MPI-staged allreduce). One MpiSession per process; every rank runs the same
// test cases in the same order (they are collective) and decides every skip
// the same way, from values agreed over MPI:
//
//   - no GPU on some rank: every rank prints why and exits 77 after
//     MPI_Finalize, so mpirun (worst rank's code) and ctest report "skipped";
//   - more ranks on a host than GPUs: the NCCL cases skip themselves with
//     the reason (NCCL needs a GPU per rank); the staged cases still run;
//   - no test case could run at all (e.g. "[nccl]" at 2 ranks on 1 GPU):
//     exit 77 as well. A failure on any rank wins over a skip.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <mpi.h>

#include <cstdio>
#include <string>

#include "comm/mpi_session.h"
#include "cuda/device.h"
#include "mpi_world.h"

namespace lockstep::testing {
namespace {
MpiSession* g_session = nullptr;
std::string g_nccl_skip_reason;  // empty: the NCCL cases can run on every rank
int g_cases_ran = 0;             // test cases that did their work on this rank
}  // namespace

Communicator& world() {
  static std::unique_ptr<Communicator> comm = g_session->world();
  return *comm;
}
const std::string& nccl_skip_reason() { return g_nccl_skip_reason; }
void note_case_ran() { ++g_cases_ran; }

}  // namespace lockstep::testing

int main(int argc, char** argv) {
  using namespace lockstep;
  MpiSession session(&argc, &argv);
  testing::g_session = &session;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  const int gpus = cuda::device_count();
  int have = gpus > 0 ? 1 : 0, all_have = 0;
  MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_have) {
    if (!have) {
      std::printf("skipped (rank %d): no GPU on this machine: %s\n", rank, cuda::unavailable_reason().c_str());
    } else if (rank == 0) {
      std::printf("skipped: another rank has no GPU\n");
    }
    std::fflush(stdout);
    return 77;  // ~MpiSession calls MPI_Finalize first; every rank returns 77
  }

  Communicator& w = testing::world();
  int nccl_ok = w.local_size() <= gpus ? 1 : 0, all_nccl_ok = 0;
  MPI_Allreduce(&nccl_ok, &all_nccl_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_nccl_ok) {
    testing::g_nccl_skip_reason = fmt::format(
        "NCCL cases skipped: {} ranks on a host but {} GPU{} here; NCCL needs one GPU per rank", w.local_size(), gpus,
        gpus == 1 ? "" : "s");
  }
  if (rank == 0) {
    std::printf("GPU collective tests: %d rank%s, %d GPU%s on rank 0's host (%s)\n", w.size(), w.size() == 1 ? "" : "s",
                gpus, gpus == 1 ? "" : "s", cuda::device_info(0).str().c_str());
    if (!all_nccl_ok) std::printf("%s\n", testing::g_nccl_skip_reason.c_str());
    std::fflush(stdout);
  }

  int rc = Catch::Session().run(argc, argv);
  if (rc == 77) rc = 76;  // 77 failed cases must not read as "skipped"
  int worst = rc, ran = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&testing::g_cases_ran, &ran, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (worst == 0 && ran == 0) {
    if (rank == 0) {
      std::printf("skipped: no selected test case could run here%s%s\n", all_nccl_ok ? "" : " (",
                  all_nccl_ok ? "" : (testing::g_nccl_skip_reason + ")").c_str());
      std::fflush(stdout);
    }
    return 77;
  }
  return worst;
}
