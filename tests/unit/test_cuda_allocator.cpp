// Host-side logic of the CUDA caching allocator (runs without a GPU): the
// size classes waste at most a quarter and at most 2 MiB, and are stable, so
// a training step's repeated requests map to the same free lists.
#include <catch2/catch.hpp>

#include "cuda/caching_allocator.h"

using lockstep::cuda::CachingAllocator;

TEST_CASE("caching allocator size classes", "[cuda]") {
  CHECK(CachingAllocator::round_size(1) == 512);
  CHECK(CachingAllocator::round_size(512) == 512);
  CHECK(CachingAllocator::round_size(513) == 1024);
  CHECK(CachingAllocator::round_size(2048) == 2048);
  CHECK(CachingAllocator::round_size(4096) == 4096);
  CHECK(CachingAllocator::round_size(4097) == 5120);
  // Above 8 MiB the step is 2 MiB: a resnet50 activation at batch 128 in bf16
  // (128 x 64 x 112 x 112 x 2 bytes = 196 MiB) is its own class, not 224 MiB.
  CHECK(CachingAllocator::round_size(size_t{205520896}) == size_t{205520896});
  CHECK(CachingAllocator::round_size(size_t{205520896} + 1) == size_t{205520896} + (size_t{2} << 20));
  CHECK(CachingAllocator::round_size((size_t{8} << 20) + 1) == (size_t{10} << 20));
  for (size_t n = 1; n < (size_t(1) << 34); n = n * 3 + 7) {
    const size_t r = CachingAllocator::round_size(n);
    INFO("n = " << n);
    CHECK(r >= n);
    CHECK(r % 512 == 0);
    CHECK(CachingAllocator::round_size(r) == r);  // a class maps to itself
    if (n > 2048) CHECK(static_cast<double>(r) <= 1.25 * static_cast<double>(n) + 1);
    CHECK(r - n < (size_t{2} << 20));  // never more than 2 MiB wasted
  }
}
