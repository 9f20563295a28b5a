// LS_MPI: checks the return code of an MPI call. Lockstep's communicators use
// MPI_ERRORS_RETURN, so a failure comes back here and is thrown with MPI's
// message, the call and file:line.
#pragma once

#include <mpi.h>

namespace lockstep {

[[noreturn]] void mpi_fail(int code, const char* call, const char* file, int line);

}  // namespace lockstep

#define LS_MPI(call)                                                                   \
  do {                                                                                 \
    const int ls_mpi_rc = (call);                                                      \
    if (ls_mpi_rc != MPI_SUCCESS) ::lockstep::mpi_fail(ls_mpi_rc, #call, __FILE__, __LINE__); \
  } while (0)
