// The CPU allocator's check against the host's available memory
// (tensor/allocator.h): a tensor larger than MemAvailable is refused with
// OutOfMemory before any of it is touched, instead of a kill by the OOM killer.
#include <catch2/catch.hpp>

#include <string>

#include "core/error.h"
#include "tensor/allocator.h"

using namespace lockstep;

TEST_CASE("the CPU allocator refuses a tensor larger than the host's available memory", "[memory]") {
  const int64_t available = host_memory_available();
  REQUIRE(available > 0);  // Linux: /proc/meminfo's MemAvailable
  CpuAllocator alloc;
  const size_t too_big = static_cast<size_t>(available) + (size_t{1} << 30);
  std::string message;
  try {
    void* p = alloc.allocate(too_big);
    alloc.deallocate(p, too_big);
  } catch (const OutOfMemory& e) {
    message = e.message();
  }
  CHECK(message.rfind("out of host memory for a tensor (", 0) == 0);
  CHECK(message.find("MiB available (MemAvailable in /proc/meminfo; 512 MiB of it kept free)") != std::string::npos);
  // Below the checked size nothing is read; a checked size that fits is allocated and zeroed.
  void* p = alloc.allocate(CpuAllocator::kCheckedBytes);
  REQUIRE(p != nullptr);
  CHECK(static_cast<unsigned char*>(p)[CpuAllocator::kCheckedBytes - 1] == 0);
  alloc.deallocate(p, CpuAllocator::kCheckedBytes);
}
