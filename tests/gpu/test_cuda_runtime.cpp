// The CUDA runtime layer: caching allocator (no cudaMalloc in the steady
// state, zero-filled blocks, stats), streams and events, host<->device copies.
#include <catch2/catch.hpp>

#include "cuda/device.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"

using namespace lockstep;
using namespace lockstep::testing;

TEST_CASE_METHOD(GpuFixture, "device tensors round-trip through host memory", "[runtime]") {
  const auto values = random_vector(1000, 1);
  Tensor d = upload(Shape{10, 100}, values);
  CHECK(d.device() == Device::cuda(0));
  CHECK(download(d) == values);
  Tensor d2 = device_zeros(Shape{10, 100});
  d2.copy_from(d);  // device to device
  CHECK(download(d2) == values);
  d2.zero();
  CHECK(download(d2) == std::vector<float>(1000, 0.f));
}

TEST_CASE_METHOD(GpuFixture, "caching allocator: zero-filled blocks, no cudaMalloc once warm", "[runtime]") {
  auto& alloc = *ctx.allocator();
  {
    Tensor a = device_zeros(Shape{1 << 20});
    a.copy_from(Tensor::from_vector(Shape{1 << 20}, std::vector<float>(1 << 20, 3.f)));
  }
  // The freed block is reused and must come back zeroed.
  Tensor b = device_zeros(Shape{1 << 20});
  CHECK(download(b) == std::vector<float>(1 << 20, 0.f));
  const auto warm = alloc.stats();
  CHECK(warm.cache_hits >= 1);
  for (int step = 0; step < 10; ++step) {
    Tensor x = device_zeros(Shape{4096, 256});
    Tensor y = device_zeros(Shape{4096, 10});
    Tensor z = device_zeros(Shape{1 << 20});
  }
  const int64_t mallocs_after_first = alloc.stats().device_mallocs;
  for (int step = 0; step < 10; ++step) {
    Tensor x = device_zeros(Shape{4096, 256});
    Tensor y = device_zeros(Shape{4096, 10});
    Tensor z = device_zeros(Shape{1 << 20});
  }
  const auto s = alloc.stats();
  CHECK(s.device_mallocs == mallocs_after_first);
  CHECK(s.peak_allocated_bytes >= int64_t(4096) * 256 * 4);
  CHECK(s.reserved_bytes >= s.allocated_bytes);
  alloc.release_cached();
  CHECK(alloc.stats().reserved_bytes == alloc.stats().allocated_bytes);
}

TEST_CASE_METHOD(GpuFixture, "the context's workspace grows on demand and trims back", "[runtime]") {
  auto& alloc = *ctx.allocator();
  const int64_t base = alloc.stats().allocated_bytes - static_cast<int64_t>(
                                                          cuda::CachingAllocator::round_size(ctx.workspace_bytes()));
  const size_t big = size_t{64} << 20, small = size_t{1} << 20;
  void* p = ctx.workspace(big);
  REQUIRE(p != nullptr);
  CHECK(ctx.workspace_bytes() == big);
  CHECK(ctx.workspace(small) == p);  // smaller requests reuse the block
  CHECK(alloc.stats().allocated_bytes == base + static_cast<int64_t>(cuda::CachingAllocator::round_size(big)));
  ctx.trim_workspace(big);  // not larger than asked: nothing changes
  CHECK(ctx.workspace_bytes() == big);
  ctx.trim_workspace(small);  // a race's scratch given back: only `small` stays allocated
  CHECK(ctx.workspace_bytes() == small);
  CHECK(alloc.stats().allocated_bytes == base + static_cast<int64_t>(cuda::CachingAllocator::round_size(small)));
  void* q = ctx.workspace(small);
  REQUIRE(q != nullptr);
  CHECK(ctx.workspace_bytes() == small);
  ctx.trim_workspace(0);
  CHECK(ctx.workspace_bytes() == 0);
  CHECK(alloc.stats().allocated_bytes == base);
}

TEST_CASE_METHOD(GpuFixture, "events order a copy stream against the compute stream", "[runtime]") {
  const int64_t n = 1 << 22;
  Tensor host = Tensor::from_vector(Shape{n}, random_vector(n, 7));
  Tensor dev = device_zeros(Shape{n});
  cuda::Stream copy;
  cuda::Event done(/*timing=*/true), start(/*timing=*/true);
  ctx.synchronize();  // the zero-fill of `dev` is on the compute stream
  start.record(copy);
  LS_CUDA_CHECK(cudaMemcpyAsync(dev.raw_data(), host.raw_data(), host.nbytes(), cudaMemcpyHostToDevice, copy.get()));
  done.record(copy);
  done.wait_on(ctx.stream());
  Tensor back = Tensor::zeros(Shape{n});
  LS_CUDA_CHECK(cudaMemcpyAsync(back.raw_data(), dev.raw_data(), dev.nbytes(), cudaMemcpyDeviceToHost,
                                ctx.raw_stream()));
  ctx.synchronize();
  CHECK(back.to_vector() == host.to_vector());
  CHECK(cuda::Event::elapsed_ms(start, done) > 0.f);
}

TEST_CASE("device selection follows the local rank", "[runtime]") {
  const int n = cuda::device_count();
  REQUIRE(n > 0);
  CHECK(cuda::select_device(0, 1, true, "--device cuda") == 0);
  CHECK(cuda::select_device(n, n + 1, false, "--device cuda") == 0);  // shared (--comm mpi)
  CHECK_THROWS_AS(cuda::select_device(n, n + 1, true, "--device cuda"), InputError);
}
