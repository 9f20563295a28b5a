// The GPU collective tests' shared state and skip rule (the runner,
// mpi_gpu_main.cpp, decides the skips and counts the cases that ran; every
// rank gets the same answer).
#pragma once

#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "mpi_world.h"

namespace lockstep::testing {

const std::string& nccl_skip_reason();  // empty: the NCCL cases can run on every rank
void note_case_ran();

// True when the NCCL cases can run on every rank (the same answer on all);
// otherwise rank 0 prints why and the case returns.
inline bool nccl_case_can_run() {
  const std::string& reason = nccl_skip_reason();
  if (!reason.empty()) {
    if (world().rank() == 0)
      std::printf("  %s: %s\n", Catch::getResultCapture().getCurrentTestName().c_str(), reason.c_str());
    return false;
  }
  note_case_ran();
  return true;
}

}  // namespace lockstep::testing
