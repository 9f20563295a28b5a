// Point-to-point helpers of the ordered reductions (comm/ordered_allreduce.h,
// comm/hierarchical_allreduce.h): waiting for requests without holding a core,
// and one exchange with every other rank of a communicator.
#pragma once

#include <mpi.h>

#include <vector>

#include "comm/mpi_check.h"

namespace lockstep {

// Polls for 200 us, then tests at growing intervals up to 50 us; errors throw
// (comm/mpi_check.h). Leaves the completed requests MPI_REQUEST_NULL.
void wait_all(MPI_Request* reqs, int count);
inline void wait_all(std::vector<MPI_Request>& reqs) { wait_all(reqs.data(), static_cast<int>(reqs.size())); }

// Posts receives of recv_count(r) elements at recv_at(r) and sends of
// send_count(r) from send_at(r) for every rank r != rank of `comm`'s `size`,
// and waits for them all. `reqs` is scratch.
template <typename RecvAt, typename RecvCount, typename SendAt, typename SendCount>
void exchange_with_all(MPI_Comm comm, int rank, int size, int tag, MPI_Datatype type, RecvAt recv_at,
                       RecvCount recv_count, SendAt send_at, SendCount send_count, std::vector<MPI_Request>& reqs) {
  reqs.clear();
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    reqs.emplace_back();
    LS_MPI(MPI_Irecv(recv_at(r), recv_count(r), type, r, tag, comm, &reqs.back()));
  }
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    reqs.emplace_back();
    LS_MPI(MPI_Isend(send_at(r), send_count(r), type, r, tag, comm, &reqs.back()));
  }
  wait_all(reqs);
}

}  // namespace lockstep
