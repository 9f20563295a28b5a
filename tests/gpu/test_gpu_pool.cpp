// Max, average and global average pooling on the GPU against the CPU ops.
//
// Tolerances: max and average pooling are compared exactly (tolerance 0, and
// argmax equal): the forward kernels evaluate the CPU's expressions in the
// CPU's order (the 2x2 stride-2 case pairs its additions like the CPU's fast
// path), and backward adds each input's contributions in ascending output
// order, which is the order of the CPU's scatter. Global average pooling sums
// in double in another order before the single rounding to fp32: 1e-6.
// Inputs with many ties (values from a small set) and all-negative planes with
// padding check the tie-breaking (first maximum in window order) and that
// padding never wins.
//
// bf16 variants (*_bf16_cuda): inputs are bf16-rounded random values uploaded
// as bf16; the reference is the CPU op on the same values in fp32, rounded to
// bf16 (bf16_rounded). The GPU widens exactly, evaluates the fp32 variant's
// expressions in the same order in fp32 registers and rounds each output once,
// so max and average pooling (forward and backward, overlapping max-pool
// windows included: their gradients are summed in fp32 and rounded once) and
// global average pooling backward are compared exactly (tolerance 0, argmax
// equal). Global average pooling forward: the fp32 results may differ by one
// fp32 ulp (double sums in another order, as above), and two fp32 values one
// ulp apart can round to adjacent bf16 values: tolerance one bf16 ulp, 2^-7
// relative (the bf16 significand has 8 bits).
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <cmath>
#include <vector>

#include "cuda/check.h"
#include "gpu_test_util.h"
#include "ops/pool2d.h"
#include "ops/pool2d_cuda.h"

using namespace lockstep;
using namespace lockstep::testing;

namespace {

// The tensor helpers copy on the legacy default stream; the ops run on the
// context's non-blocking stream. Wait for everything before launching.
void settle() { LS_CUDA_CHECK(cudaDeviceSynchronize()); }

struct PoolCase {
  int64_t planes, h, w, k, stride, pad;
};

ops::Pool2dShape make_shape(const PoolCase& c) {
  ops::Pool2dShape s{c.planes, c.h, c.w, c.k, c.stride, 0, 0, c.pad};
  s.oh = (c.h + 2 * c.pad - c.k) / c.stride + 1;
  s.ow = (c.w + 2 * c.pad - c.k) / c.stride + 1;
  return s;
}

// Input kinds: continuous values, values from {-1, -0.5, 0, 0.5, 1} (ties),
// and all-negative values (padding, if it took part, would win with 0).
std::vector<float> pool_input(int64_t n, uint64_t seed, int kind) {
  auto v = random_vector(n, seed);
  if (kind == 1)
    for (float& x : v) x = std::round(x * 2.f) / 2.f;
  if (kind == 2)
    for (float& x : v) x = -1.5f - std::abs(x);
  return v;
}

// A BF16 device tensor's values, widened to fp32 (exact).
std::vector<float> download_bf16_values(GpuFixture& f, const Tensor& t) { return bf16_values(download_bf16(f, t)); }

std::vector<int32_t> download_i32(GpuFixture& f, const Tensor& t) {
  f.ctx.synchronize();
  std::vector<int32_t> v(static_cast<size_t>(t.numel()));
  LS_CUDA_CHECK(cudaMemcpy(v.data(), t.raw_data(), t.nbytes(), cudaMemcpyDeviceToHost));
  return v;
}

}  // namespace

TEST_CASE_METHOD(GpuFixture, "maxpool2d forward and backward match the CPU exactly", "[pool]") {
  const PoolCase cases[] = {
      {6, 8, 8, 2, 2, 0},    // the CPU's 2x2 fast path
      {5, 9, 7, 2, 2, 0},    // odd sizes: the last row/column belongs to no window
      {4, 15, 15, 3, 2, 1},  // ResNet's 3x3 stride-2 pad-1 (overlapping windows)
      {3, 10, 11, 3, 1, 1},  // stride 1, heavy overlap
      {3, 9, 9, 3, 3, 0},    // non-overlapping 3x3
      {2, 7, 7, 3, 2, 0},    // overlapping, no padding
      {2, 6, 6, 4, 2, 2},    // padding = k / 2
      {7, 1, 1, 1, 1, 0},    // 1x1 planes
  };
  uint64_t seed = 10;
  for (const PoolCase& c : cases)
    for (int kind = 0; kind < 3; ++kind) {
      CAPTURE(c.planes, c.h, c.w, c.k, c.stride, c.pad, kind);
      const ops::Pool2dShape s = make_shape(c);
      const int64_t nx = s.planes * s.h * s.w, ny = s.planes * s.oh * s.ow;
      const auto x = pool_input(nx, ++seed, kind), dy = random_vector(ny, ++seed), dx0 = random_vector(nx, ++seed);

      std::vector<float> y_cpu(static_cast<size_t>(ny)), dx_cpu(static_cast<size_t>(nx));
      std::vector<int32_t> am_cpu(static_cast<size_t>(ny));
      ops::maxpool2d_forward_cpu(s, x.data(), y_cpu.data(), am_cpu.data());
      ops::maxpool2d_backward_cpu(s, dy.data(), am_cpu.data(), dx_cpu.data());

      Tensor x_ = upload(Shape{nx}, x), y_ = device_zeros(Shape{ny}), am_ = device_zeros(Shape{ny}, DType::I32);
      Tensor dy_ = upload(Shape{ny}, dy), dx_ = upload(Shape{nx}, dx0);  // dx starts as garbage
      settle();
      ops::maxpool2d_forward_cuda(s, x_.data<float>(), y_.data<float>(), am_.data<int32_t>(), ctx.raw_stream());
      ops::maxpool2d_backward_cuda(s, dy_.data<float>(), am_.data<int32_t>(), dx_.data<float>(), ctx.raw_stream());
      LS_REQUIRE_PARITY(download(y_), y_cpu, 0.0);
      CHECK(download_i32(*this, am_) == am_cpu);
      LS_REQUIRE_PARITY(download(dx_), dx_cpu, 0.0);
      if (kind == 2)
        for (float v : download(y_)) REQUIRE(v < -1.f);  // padding never wins
    }
}

TEST_CASE_METHOD(GpuFixture, "avgpool2d forward and backward match the CPU exactly", "[pool]") {
  const PoolCase cases[] = {
      {6, 8, 8, 2, 2, 0},    // the CPU's 2x2 fast path
      {5, 9, 7, 2, 2, 0},    // odd sizes: the last row/column gets no gradient
      {3, 10, 10, 3, 1, 0},  // overlapping windows
      {3, 9, 9, 3, 3, 0},    // non-overlapping 3x3
      {2, 7, 8, 3, 2, 0},    // overlapping stride 2, leftover column
      {4, 7, 7, 7, 1, 0},    // one window per plane
  };
  uint64_t seed = 500;
  for (const PoolCase& c : cases) {
    CAPTURE(c.planes, c.h, c.w, c.k, c.stride);
    const ops::Pool2dShape s = make_shape(c);
    const int64_t nx = s.planes * s.h * s.w, ny = s.planes * s.oh * s.ow;
    const auto x = random_vector(nx, ++seed), dy = random_vector(ny, ++seed), dx0 = random_vector(nx, ++seed);

    std::vector<float> y_cpu(static_cast<size_t>(ny)), dx_cpu(static_cast<size_t>(nx));
    ops::avgpool2d_forward_cpu(s, x.data(), y_cpu.data());
    ops::avgpool2d_backward_cpu(s, dy.data(), dx_cpu.data());

    Tensor x_ = upload(Shape{nx}, x), y_ = device_zeros(Shape{ny});
    Tensor dy_ = upload(Shape{ny}, dy), dx_ = upload(Shape{nx}, dx0);  // dx starts as garbage
    settle();
    ops::avgpool2d_forward_cuda(s, x_.data<float>(), y_.data<float>(), ctx.raw_stream());
    ops::avgpool2d_backward_cuda(s, dy_.data<float>(), dx_.data<float>(), ctx.raw_stream());
    LS_REQUIRE_PARITY(download(y_), y_cpu, 0.0);
    LS_REQUIRE_PARITY(download(dx_), dx_cpu, 0.0);
  }
}

TEST_CASE_METHOD(GpuFixture, "global average pooling matches the CPU", "[pool]") {
  struct GCase {
    int64_t planes, hw;
  };
  const GCase cases[] = {{7, 49}, {3, 1}, {192, 196}, {5, 3136}, {2, 33}};
  uint64_t seed = 800;
  for (const GCase& c : cases) {
    CAPTURE(c.planes, c.hw);
    const auto x = random_vector(c.planes * c.hw, ++seed), dy = random_vector(c.planes, ++seed);
    std::vector<float> y_cpu(static_cast<size_t>(c.planes)), dx_cpu(static_cast<size_t>(c.planes * c.hw));
    ops::global_avgpool_forward_cpu(c.planes, c.hw, x.data(), y_cpu.data());
    ops::global_avgpool_backward_cpu(c.planes, c.hw, dy.data(), dx_cpu.data());

    Tensor x_ = upload(Shape{c.planes * c.hw}, x), y_ = device_zeros(Shape{c.planes});
    Tensor dy_ = upload(Shape{c.planes}, dy), dx_ = upload(Shape{c.planes * c.hw}, random_vector(c.planes * c.hw, 1));
    settle();
    ops::global_avgpool_forward_cuda(c.planes, c.hw, x_.data<float>(), y_.data<float>(), ctx.raw_stream());
    ops::global_avgpool_backward_cuda(c.planes, c.hw, dy_.data<float>(), dx_.data<float>(), ctx.raw_stream());
    LS_REQUIRE_PARITY(download(y_), y_cpu, 1e-6);
    LS_REQUIRE_PARITY(download(dx_), dx_cpu, 0.0);  // dy * (1/hw) in fp32, as on the CPU
  }
}

TEST_CASE_METHOD(GpuFixture, "maxpool2d bf16 forward and backward match the CPU on bf16 values exactly", "[pool]") {
  const PoolCase cases[] = {
      {6, 8, 8, 2, 2, 0},    // the CPU's 2x2 fast path
      {5, 9, 7, 2, 2, 0},    // odd sizes: the last row/column belongs to no window
      {4, 15, 15, 3, 2, 1},  // ResNet's 3x3 stride-2 pad-1 (overlapping windows)
      {3, 10, 11, 3, 1, 1},  // stride 1, heavy overlap: several gradients per input, rounded once
      {3, 9, 9, 3, 3, 0},    // non-overlapping 3x3
      {2, 7, 7, 3, 2, 0},    // overlapping, no padding
      {2, 6, 6, 4, 2, 2},    // padding = k / 2
      {7, 1, 1, 1, 1, 0},    // 1x1 planes
  };
  uint64_t seed = 1010;
  for (const PoolCase& c : cases)
    for (int kind = 0; kind < 3; ++kind) {
      CAPTURE(c.planes, c.h, c.w, c.k, c.stride, c.pad, kind);
      const ops::Pool2dShape s = make_shape(c);
      const int64_t nx = s.planes * s.h * s.w, ny = s.planes * s.oh * s.ow;
      const auto x16 = bf16_bits(pool_input(nx, ++seed, kind)), dy16 = bf16_bits(random_vector(ny, ++seed));
      const auto dx0_16 = bf16_bits(random_vector(nx, ++seed));
      const auto x = bf16_values(x16), dy = bf16_values(dy16);

      std::vector<float> y_cpu(static_cast<size_t>(ny)), dx_cpu(static_cast<size_t>(nx));
      std::vector<int32_t> am_cpu(static_cast<size_t>(ny));
      ops::maxpool2d_forward_cpu(s, x.data(), y_cpu.data(), am_cpu.data());
      ops::maxpool2d_backward_cpu(s, dy.data(), am_cpu.data(), dx_cpu.data());

      Tensor x_ = upload_bf16(*this, x16), y_ = device_zeros(Shape{ny}, DType::BF16);
      Tensor am_ = device_zeros(Shape{ny}, DType::I32);
      Tensor dy_ = upload_bf16(*this, dy16), dx_ = upload_bf16(*this, dx0_16);  // dx starts as garbage
      settle();
      ops::maxpool2d_forward_bf16_cuda(s, x_.raw_data(), y_.raw_data(), am_.data<int32_t>(), ctx.raw_stream());
      ops::maxpool2d_backward_bf16_cuda(s, dy_.raw_data(), am_.data<int32_t>(), dx_.raw_data(), ctx.raw_stream());
      const auto y_gpu = download_bf16_values(*this, y_);
      LS_REQUIRE_PARITY(y_gpu, bf16_rounded(y_cpu), 0.0);  // y_cpu holds input values: rounding is a no-op
      CHECK(download_i32(*this, am_) == am_cpu);
      LS_REQUIRE_PARITY(download_bf16_values(*this, dx_), bf16_rounded(dx_cpu), 0.0);
      if (kind == 2)
        for (float v : y_gpu) REQUIRE(v < -1.f);  // padding never wins
    }
}

TEST_CASE_METHOD(GpuFixture, "avgpool2d bf16 forward and backward match the CPU on bf16 values exactly", "[pool]") {
  const PoolCase cases[] = {
      {6, 8, 8, 2, 2, 0},    // the CPU's 2x2 fast path
      {5, 9, 7, 2, 2, 0},    // odd sizes: the last row/column gets no gradient
      {3, 10, 10, 3, 1, 0},  // overlapping windows
      {3, 9, 9, 3, 3, 0},    // non-overlapping 3x3
      {2, 7, 8, 3, 2, 0},    // overlapping stride 2, leftover column
      {4, 7, 7, 7, 1, 0},    // one window per plane
  };
  uint64_t seed = 1500;
  for (const PoolCase& c : cases) {
    CAPTURE(c.planes, c.h, c.w, c.k, c.stride);
    const ops::Pool2dShape s = make_shape(c);
    const int64_t nx = s.planes * s.h * s.w, ny = s.planes * s.oh * s.ow;
    const auto x16 = bf16_bits(random_vector(nx, ++seed)), dy16 = bf16_bits(random_vector(ny, ++seed));
    const auto dx0_16 = bf16_bits(random_vector(nx, ++seed));
    const auto x = bf16_values(x16), dy = bf16_values(dy16);

    std::vector<float> y_cpu(static_cast<size_t>(ny)), dx_cpu(static_cast<size_t>(nx));
    ops::avgpool2d_forward_cpu(s, x.data(), y_cpu.data());
    ops::avgpool2d_backward_cpu(s, dy.data(), dx_cpu.data());

    Tensor x_ = upload_bf16(*this, x16), y_ = device_zeros(Shape{ny}, DType::BF16);
    Tensor dy_ = upload_bf16(*this, dy16), dx_ = upload_bf16(*this, dx0_16);  // dx starts as garbage
    settle();
    ops::avgpool2d_forward_bf16_cuda(s, x_.raw_data(), y_.raw_data(), ctx.raw_stream());
    ops::avgpool2d_backward_bf16_cuda(s, dy_.raw_data(), dx_.raw_data(), ctx.raw_stream());
    LS_REQUIRE_PARITY(download_bf16_values(*this, y_), bf16_rounded(y_cpu), 0.0);
    LS_REQUIRE_PARITY(download_bf16_values(*this, dx_), bf16_rounded(dx_cpu), 0.0);
  }
}

TEST_CASE_METHOD(GpuFixture, "global average pooling bf16 matches the CPU on bf16 values", "[pool]") {
  struct GCase {
    int64_t planes, hw;
  };
  const GCase cases[] = {{7, 49}, {3, 1}, {192, 196}, {5, 3136}, {2, 33}};
  const double kOneBf16Ulp = 1.0 / 128;  // 2^-7: see the tolerance note at the top
  uint64_t seed = 1800;
  for (const GCase& c : cases) {
    CAPTURE(c.planes, c.hw);
    const int64_t n = c.planes * c.hw;
    const auto x16 = bf16_bits(random_vector(n, ++seed)), dy16 = bf16_bits(random_vector(c.planes, ++seed));
    const auto x = bf16_values(x16), dy = bf16_values(dy16);
    std::vector<float> y_cpu(static_cast<size_t>(c.planes)), dx_cpu(static_cast<size_t>(n));
    ops::global_avgpool_forward_cpu(c.planes, c.hw, x.data(), y_cpu.data());
    ops::global_avgpool_backward_cpu(c.planes, c.hw, dy.data(), dx_cpu.data());

    Tensor x_ = upload_bf16(*this, x16), y_ = device_zeros(Shape{c.planes}, DType::BF16);
    Tensor dy_ = upload_bf16(*this, dy16), dx_ = upload_bf16(*this, bf16_bits(random_vector(n, 1)));
    settle();
    ops::global_avgpool_forward_bf16_cuda(c.planes, c.hw, x_.raw_data(), y_.raw_data(), ctx.raw_stream());
    ops::global_avgpool_backward_bf16_cuda(c.planes, c.hw, dy_.raw_data(), dx_.raw_data(), ctx.raw_stream());
    LS_REQUIRE_PARITY(download_bf16_values(*this, y_), bf16_rounded(y_cpu), kOneBf16Ulp);
    // dy * (1/hw) in fp32, as on the CPU, rounded once.
    LS_REQUIRE_PARITY(download_bf16_values(*this, dx_), bf16_rounded(dx_cpu), 0.0);
  }
}

TEST_CASE_METHOD(GpuFixture, "pooling bf16 accepts zero planes", "[pool]") {
  const ops::Pool2dShape s = make_shape({0, 8, 8, 2, 2, 0});
  const cudaStream_t st = ctx.raw_stream();
  ops::maxpool2d_forward_bf16_cuda(s, nullptr, nullptr, nullptr, st);
  ops::maxpool2d_backward_bf16_cuda(s, nullptr, nullptr, nullptr, st);
  ops::avgpool2d_forward_bf16_cuda(s, nullptr, nullptr, st);
  ops::avgpool2d_backward_bf16_cuda(s, nullptr, nullptr, st);
  ops::global_avgpool_forward_bf16_cuda(0, 49, nullptr, nullptr, st);
  ops::global_avgpool_backward_bf16_cuda(0, 49, nullptr, nullptr, st);
  ctx.synchronize();
  LS_CUDA_CHECK(cudaGetLastError());
}
