// The MPI tests' communicator over all ranks (made once by mpi_main.cpp).
#pragma once

#include "comm/communicator.h"

namespace lockstep::testing {
Communicator& world();
}
