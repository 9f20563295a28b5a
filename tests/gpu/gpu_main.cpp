// Catch2 runner for the GPU tests. Without a usable GPU (no device, no driver)
// it prints why and exits 77, which ctest reports as "skipped" (the gpu.*
// tests carry SKIP_RETURN_CODE 77): a machine without a GPU never passes them.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "cuda/device.h"

int main(int argc, char** argv) {
  if (lockstep::cuda::device_count() == 0) {
    std::printf("skipped: no GPU on this machine: %s\n", lockstep::cuda::unavailable_reason().c_str());
    return 77;
  }
  const auto info = lockstep::cuda::device_info(0);
  std::printf("GPU tests on cuda:0 %s\n", info.str().c_str());
  return Catch::Session().run(argc, argv);
}
