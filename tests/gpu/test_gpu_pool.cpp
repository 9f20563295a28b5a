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
// 16-bit data (dt first; each case runs for DType::BF16 and DType::F16):
// inputs are random values rounded to dt and uploaded as dt; the reference is
// the CPU op on the same values widened to fp32, rounded to dt (rounded_16).
// The GPU widens exactly, evaluates the fp32 variant's expressions in the same
// order in fp32 registers and rounds each output once (nearest even), as the
// reference does, so max and average pooling (forward and backward,
// overlapping max-pool windows included: their gradients are summed in fp32 and
// rounded once) and global average pooling backward are compared exactly
// (tolerance 0, argmax equal), for either type. Global average pooling
// forward: the fp32 results may differ by one fp32 ulp (double sums in another
// order, as above), and two fp32 values one ulp apart can round to adjacent
// 16-bit values: tolerance one 16-bit ulp at 1 (the parity measure is relative
// above 1 and absolute below, where ulps are no larger), 2^(1 +
// half_ulp_exponent): 2^-7 for bf16 (8 significant bits), 2^-10 for fp16 (11).
// fp16 range: inputs are within [-2.5, 2.5] and outputs at most 9 in magnitude
// (max-pool backward, 3x3 stride 1: at most 9 gradients per input), far below
// fp16's 65504. Draws under 2^-14 in magnitude become fp16 subnormals and stay
// exact: they widen to fp32 normals, every fp32 sum and product here (sums of
// fp16 values, times 0.25, 1/(k*k) or 1/hw >= 1/3136) is 0 or far above fp32's
// subnormal range, and the final rounding into fp16's subnormal range is the
// same IEEE round to nearest even on the GPU (__float2half_rn) and on the host
// (_Float16).
//
// NHWC (s.layout = NHWC, x [N, H, W, C]; fp32 and both 16-bit types): the GPU
// ops are compared with the CPU NHWC ops (which tests/ops/test_layout_pool.cpp
// shows are bitwise the NCHW ops on transposed data) at the NCHW cases'
// tolerances: max and average pooling exactly (tolerance 0, argmax equal, 16-bit
// against the CPU result rounded once), for the reasons above (the NHWC kernels
// evaluate the same expressions in the same order, only their index mapping
// differs). One exception, stricter: NHWC global average pooling forward is
// compared exactly too (fp32 and 16-bit), since there each GPU thread adds its
// channel's hw values in position order in double, the CPU's exact sum, where
// the NCHW kernel's warp sums in another order.
// Layout transposes (ops/layout/layout_cuda.h): pure copies, compared bitwise (F32:
// with the CPU transposes; BF16 / F16: with a host transpose of the 16-bit bit
// patterns), on shapes with partial 32x32 tiles, more than 65535 items (the
// grid's item loop) and special values (NaN payloads, -0, infinities).
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cuda/check.h"
#include "gpu_test_util.h"
#include "ops/layout/layout_cpu.h"
#include "ops/layout/layout_cuda.h"
#include "ops/pool/pool2d_cpu.h"
#include "ops/pool/pool2d_cuda.h"

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

// A 16-bit (dt) device tensor's values, widened to fp32 (exact).
std::vector<float> download_16_values(GpuFixture& f, DType dt, const Tensor& t) {
  return values_16(dt, download_16(f, t));
}

constexpr DType k16BitTypes[] = {DType::BF16, DType::F16};

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
      ops::maxpool2d_forward_cuda(DType::F32, s, x_.data<float>(), y_.data<float>(), am_.data<int32_t>(), ctx.raw_stream());
      ops::maxpool2d_backward_cuda(DType::F32, s, dy_.data<float>(), am_.data<int32_t>(), dx_.data<float>(), ctx.raw_stream());
      LS_REQUIRE_PARITY(download(y_), y_cpu, 0.0);
      CHECK(download_i32(*this, am_) == am_cpu);
      LS_REQUIRE_PARITY(download(dx_), dx_cpu, 0.0);
      if (kind == 2)
        for (float v : download(y_)) REQUIRE(v < -1.f);  // padding never wins
    }
}

// Average-pooling shapes shared by the fp32 and 16-bit cases.
const PoolCase kAvgPoolCases[] = {
    {6, 8, 8, 2, 2, 0},    // the CPU's 2x2 fast path
    {5, 9, 7, 2, 2, 0},    // odd sizes: the last row/column gets no gradient
    {3, 10, 10, 3, 1, 0},  // overlapping windows
    {3, 9, 9, 3, 3, 0},    // non-overlapping 3x3
    {2, 7, 8, 3, 2, 0},    // overlapping stride 2, leftover column
    {4, 7, 7, 7, 1, 0},    // one window per plane
};

TEST_CASE_METHOD(GpuFixture, "avgpool2d forward and backward match the CPU exactly", "[pool]") {
  const auto& cases = kAvgPoolCases;
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
    ops::avgpool2d_forward_cuda(DType::F32, s, x_.data<float>(), y_.data<float>(), ctx.raw_stream());
    ops::avgpool2d_backward_cuda(DType::F32, s, dy_.data<float>(), dx_.data<float>(), ctx.raw_stream());
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
    ops::global_avgpool_forward_cuda(DType::F32, c.planes, c.hw, x_.data<float>(), y_.data<float>(), ctx.raw_stream());
    ops::global_avgpool_backward_cuda(DType::F32, c.planes, c.hw, dy_.data<float>(), dx_.data<float>(), ctx.raw_stream());
    LS_REQUIRE_PARITY(download(y_), y_cpu, 1e-6);
    LS_REQUIRE_PARITY(download(dx_), dx_cpu, 0.0);  // dy * (1/hw) in fp32, as on the CPU
  }
}

TEST_CASE_METHOD(GpuFixture, "maxpool2d 16-bit forward and backward match the CPU on 16-bit values exactly",
                 "[pool]") {
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
  for (const DType dt : k16BitTypes) {
    uint64_t seed = 1010;
    for (const PoolCase& c : cases)
      for (int kind = 0; kind < 3; ++kind) {
        INFO(dtype_name(dt));
        CAPTURE(c.planes, c.h, c.w, c.k, c.stride, c.pad, kind);
        const ops::Pool2dShape s = make_shape(c);
        const int64_t nx = s.planes * s.h * s.w, ny = s.planes * s.oh * s.ow;
        const auto x16 = bits_16(dt, pool_input(nx, ++seed, kind)), dy16 = bits_16(dt, random_vector(ny, ++seed));
        const auto dx0_16 = bits_16(dt, random_vector(nx, ++seed));
        const auto x = values_16(dt, x16), dy = values_16(dt, dy16);

        std::vector<float> y_cpu(static_cast<size_t>(ny)), dx_cpu(static_cast<size_t>(nx));
        std::vector<int32_t> am_cpu(static_cast<size_t>(ny));
        ops::maxpool2d_forward_cpu(s, x.data(), y_cpu.data(), am_cpu.data());
        ops::maxpool2d_backward_cpu(s, dy.data(), am_cpu.data(), dx_cpu.data());

        Tensor x_ = upload_16(*this, dt, x16), y_ = device_zeros(Shape{ny}, dt);
        Tensor am_ = device_zeros(Shape{ny}, DType::I32);
        Tensor dy_ = upload_16(*this, dt, dy16), dx_ = upload_16(*this, dt, dx0_16);  // dx starts as garbage
        settle();
        ops::maxpool2d_forward_cuda(dt, s, x_.raw_data(), y_.raw_data(), am_.data<int32_t>(), ctx.raw_stream());
        ops::maxpool2d_backward_cuda(dt, s, dy_.raw_data(), am_.data<int32_t>(), dx_.raw_data(),
                                        ctx.raw_stream());
        const auto y_gpu = download_16_values(*this, dt, y_);
        LS_REQUIRE_PARITY(y_gpu, rounded_16(dt, y_cpu), 0.0);  // y_cpu holds input values: rounding is a no-op
        CHECK(download_i32(*this, am_) == am_cpu);
        LS_REQUIRE_PARITY(download_16_values(*this, dt, dx_), rounded_16(dt, dx_cpu), 0.0);
        if (kind == 2)
          for (float v : y_gpu) REQUIRE(v < -1.f);  // padding never wins
      }
  }
}

TEST_CASE_METHOD(GpuFixture, "avgpool2d 16-bit forward and backward match the CPU on 16-bit values exactly",
                 "[pool]") {
  const auto& cases = kAvgPoolCases;
  for (const DType dt : k16BitTypes) {
    uint64_t seed = 1500;
    for (const PoolCase& c : cases) {
      INFO(dtype_name(dt));
      CAPTURE(c.planes, c.h, c.w, c.k, c.stride);
      const ops::Pool2dShape s = make_shape(c);
      const int64_t nx = s.planes * s.h * s.w, ny = s.planes * s.oh * s.ow;
      const auto x16 = bits_16(dt, random_vector(nx, ++seed)), dy16 = bits_16(dt, random_vector(ny, ++seed));
      const auto dx0_16 = bits_16(dt, random_vector(nx, ++seed));
      const auto x = values_16(dt, x16), dy = values_16(dt, dy16);

      std::vector<float> y_cpu(static_cast<size_t>(ny)), dx_cpu(static_cast<size_t>(nx));
      ops::avgpool2d_forward_cpu(s, x.data(), y_cpu.data());
      ops::avgpool2d_backward_cpu(s, dy.data(), dx_cpu.data());

      Tensor x_ = upload_16(*this, dt, x16), y_ = device_zeros(Shape{ny}, dt);
      Tensor dy_ = upload_16(*this, dt, dy16), dx_ = upload_16(*this, dt, dx0_16);  // dx starts as garbage
      settle();
      ops::avgpool2d_forward_cuda(dt, s, x_.raw_data(), y_.raw_data(), ctx.raw_stream());
      ops::avgpool2d_backward_cuda(dt, s, dy_.raw_data(), dx_.raw_data(), ctx.raw_stream());
      LS_REQUIRE_PARITY(download_16_values(*this, dt, y_), rounded_16(dt, y_cpu), 0.0);
      LS_REQUIRE_PARITY(download_16_values(*this, dt, dx_), rounded_16(dt, dx_cpu), 0.0);
    }
  }
}

TEST_CASE_METHOD(GpuFixture, "global average pooling 16-bit matches the CPU on 16-bit values", "[pool]") {
  struct GCase {
    int64_t planes, hw;
  };
  const GCase cases[] = {{7, 49}, {3, 1}, {192, 196}, {5, 3136}, {2, 33}};
  for (const DType dt : k16BitTypes) {
    // One 16-bit ulp in [1, 2): 2^-7 (bf16), 2^-10 (fp16); see the tolerance note at the top.
    const double one_ulp = std::ldexp(1.0, half_ulp_exponent(dt) + 1);
    uint64_t seed = 1800;
    for (const GCase& c : cases) {
      INFO(dtype_name(dt));
      CAPTURE(c.planes, c.hw);
      const int64_t n = c.planes * c.hw;
      const auto x16 = bits_16(dt, random_vector(n, ++seed)), dy16 = bits_16(dt, random_vector(c.planes, ++seed));
      const auto x = values_16(dt, x16), dy = values_16(dt, dy16);
      std::vector<float> y_cpu(static_cast<size_t>(c.planes)), dx_cpu(static_cast<size_t>(n));
      ops::global_avgpool_forward_cpu(c.planes, c.hw, x.data(), y_cpu.data());
      ops::global_avgpool_backward_cpu(c.planes, c.hw, dy.data(), dx_cpu.data());

      Tensor x_ = upload_16(*this, dt, x16), y_ = device_zeros(Shape{c.planes}, dt);
      Tensor dy_ = upload_16(*this, dt, dy16), dx_ = upload_16(*this, dt, bits_16(dt, random_vector(n, 1)));
      settle();
      ops::global_avgpool_forward_cuda(dt, c.planes, c.hw, x_.raw_data(), y_.raw_data(), ctx.raw_stream());
      ops::global_avgpool_backward_cuda(dt, c.planes, c.hw, dy_.raw_data(), dx_.raw_data(), ctx.raw_stream());
      LS_REQUIRE_PARITY(download_16_values(*this, dt, y_), rounded_16(dt, y_cpu), one_ulp);
      // dy * (1/hw) in fp32, as on the CPU, rounded once.
      LS_REQUIRE_PARITY(download_16_values(*this, dt, dx_), rounded_16(dt, dx_cpu), 0.0);
    }
  }
}

TEST_CASE_METHOD(GpuFixture, "pooling 16-bit accepts zero planes", "[pool]") {
  const ops::Pool2dShape s = make_shape({0, 8, 8, 2, 2, 0});
  const cudaStream_t st = ctx.raw_stream();
  for (const DType dt : k16BitTypes) {
    INFO(dtype_name(dt));
    ops::maxpool2d_forward_cuda(dt, s, nullptr, nullptr, nullptr, st);
    ops::maxpool2d_backward_cuda(dt, s, nullptr, nullptr, nullptr, st);
    ops::avgpool2d_forward_cuda(dt, s, nullptr, nullptr, st);
    ops::avgpool2d_backward_cuda(dt, s, nullptr, nullptr, st);
    ops::global_avgpool_forward_cuda(dt, 0, 49, nullptr, nullptr, st);
    ops::global_avgpool_backward_cuda(dt, 0, 49, nullptr, nullptr, st);
  }
  ctx.synchronize();
  LS_CUDA_CHECK(cudaGetLastError());
}

TEST_CASE_METHOD(GpuFixture, "pooling rejects types other than F32, BF16 and F16", "[pool]") {
  // dt is checked before the shape, so zero planes and null pointers suffice; nothing is launched.
  const ops::Pool2dShape s = make_shape({0, 8, 8, 2, 2, 0});
  const cudaStream_t st = ctx.raw_stream();
  for (const DType dt : {DType::F64, DType::I32, DType::U8}) {
    INFO(dtype_name(dt));
    REQUIRE_THROWS(ops::maxpool2d_forward_cuda(dt, s, nullptr, nullptr, nullptr, st));
    REQUIRE_THROWS(ops::maxpool2d_backward_cuda(dt, s, nullptr, nullptr, nullptr, st));
    REQUIRE_THROWS(ops::avgpool2d_forward_cuda(dt, s, nullptr, nullptr, st));
    REQUIRE_THROWS(ops::avgpool2d_backward_cuda(dt, s, nullptr, nullptr, st));
    REQUIRE_THROWS(ops::global_avgpool_forward_cuda(dt, 0, 49, nullptr, nullptr, st));
    REQUIRE_THROWS(ops::global_avgpool_backward_cuda(dt, 0, 49, nullptr, nullptr, st));
  }
}

// ---- NHWC pooling: x [n, h, w, c] (s.layout = NHWC, s.c = c) ----

namespace {

struct NhwcCase {
  int64_t n, c, h, w, k, stride, pad;
};

ops::Pool2dShape make_nhwc_shape(const NhwcCase& c) {
  ops::Pool2dShape s = make_shape({c.n * c.c, c.h, c.w, c.k, c.stride, c.pad});
  s.layout = Layout::NHWC;
  s.c = c.c;
  return s;
}

const NhwcCase kNhwcMaxCases[] = {
    {2, 5, 8, 8, 2, 2, 0},     // the CPU's 2x2 shape
    {3, 1, 9, 7, 2, 2, 0},     // odd sizes, c = 1
    {2, 5, 15, 15, 3, 2, 1},   // ResNet's 3x3 stride-2 pad-1
    {2, 64, 16, 16, 3, 2, 1},  // ResNet's stem channels: several warps per pixel row (forward packed)
    {2, 5, 10, 11, 3, 1, 1},   // stride 1, heavy overlap
    {3, 13, 9, 9, 3, 3, 0},    // non-overlapping 3x3
    {2, 3, 6, 6, 4, 2, 2},     // padding = k / 2
    {4, 300, 1, 1, 1, 1, 0},   // 1x1 images, c > one block of threads
    {2, 16, 8, 8, 2, 2, 0},    // tiling windows, c a multiple of the 16-byte pack (packed forward and scatter)
    {2, 8, 6, 6, 3, 3, 0},     // tiling 3x3 windows, packed for fp32 and 16 bits
    {2, 24, 7, 7, 2, 2, 0},    // packable c, but a leftover row and column: packed forward, the gather
};

const NhwcCase kNhwcAvgCases[] = {
    {2, 5, 8, 8, 2, 2, 0},    // the CPU's 2x2 fast path
    {3, 1, 9, 7, 2, 2, 0},    // odd sizes, c = 1
    {2, 5, 10, 10, 3, 1, 0},  // overlapping windows
    {3, 13, 9, 9, 3, 3, 0},   // non-overlapping 3x3
    {2, 64, 7, 8, 3, 2, 0},   // overlapping stride 2, leftover column
    {2, 5, 7, 7, 7, 1, 0},    // one window per image
};

// A device tensor of int32 argmax values, read back.
Tensor device_i32(GpuFixture& f, int64_t n) { return f.device_zeros(Shape{n}, DType::I32); }

}  // namespace

TEST_CASE_METHOD(GpuFixture, "NHWC maxpool2d forward and backward match the CPU exactly", "[pool]") {
  uint64_t seed = 2010;
  for (const NhwcCase& c : kNhwcMaxCases)
    for (int kind = 0; kind < 3; ++kind) {
      CAPTURE(c.n, c.c, c.h, c.w, c.k, c.stride, c.pad, kind);
      const ops::Pool2dShape s = make_nhwc_shape(c);
      const int64_t nx = s.planes * s.h * s.w, ny = s.planes * s.oh * s.ow;
      const auto x = pool_input(nx, ++seed, kind), dy = random_vector(ny, ++seed), dx0 = random_vector(nx, ++seed);

      std::vector<float> y_cpu(static_cast<size_t>(ny)), dx_cpu(static_cast<size_t>(nx));
      std::vector<int32_t> am_cpu(static_cast<size_t>(ny));
      ops::maxpool2d_forward_cpu(s, x.data(), y_cpu.data(), am_cpu.data());
      ops::maxpool2d_backward_cpu(s, dy.data(), am_cpu.data(), dx_cpu.data());

      Tensor x_ = upload(Shape{nx}, x), y_ = device_zeros(Shape{ny}), am_ = device_i32(*this, ny);
      Tensor dy_ = upload(Shape{ny}, dy), dx_ = upload(Shape{nx}, dx0);  // dx starts as garbage
      settle();
      ops::maxpool2d_forward_cuda(DType::F32, s, x_.data<float>(), y_.data<float>(), am_.data<int32_t>(), ctx.raw_stream());
      ops::maxpool2d_backward_cuda(DType::F32, s, dy_.data<float>(), am_.data<int32_t>(), dx_.data<float>(), ctx.raw_stream());
      LS_REQUIRE_PARITY(download(y_), y_cpu, 0.0);
      CHECK(download_i32(*this, am_) == am_cpu);
      LS_REQUIRE_PARITY(download(dx_), dx_cpu, 0.0);
      if (kind == 2)
        for (float v : download(y_)) REQUIRE(v < -1.f);  // padding never wins
    }
}

TEST_CASE_METHOD(GpuFixture, "NHWC maxpool2d 16-bit forward and backward match the CPU on 16-bit values exactly",
                 "[pool]") {
  for (const DType dt : k16BitTypes) {
    uint64_t seed = 2510;
    for (const NhwcCase& c : kNhwcMaxCases)
      for (int kind = 0; kind < 3; ++kind) {
        INFO(dtype_name(dt));
        CAPTURE(c.n, c.c, c.h, c.w, c.k, c.stride, c.pad, kind);
        const ops::Pool2dShape s = make_nhwc_shape(c);
        const int64_t nx = s.planes * s.h * s.w, ny = s.planes * s.oh * s.ow;
        const auto x16 = bits_16(dt, pool_input(nx, ++seed, kind)), dy16 = bits_16(dt, random_vector(ny, ++seed));
        const auto dx0_16 = bits_16(dt, random_vector(nx, ++seed));
        const auto x = values_16(dt, x16), dy = values_16(dt, dy16);

        std::vector<float> y_cpu(static_cast<size_t>(ny)), dx_cpu(static_cast<size_t>(nx));
        std::vector<int32_t> am_cpu(static_cast<size_t>(ny));
        ops::maxpool2d_forward_cpu(s, x.data(), y_cpu.data(), am_cpu.data());
        ops::maxpool2d_backward_cpu(s, dy.data(), am_cpu.data(), dx_cpu.data());

        Tensor x_ = upload_16(*this, dt, x16), y_ = device_zeros(Shape{ny}, dt), am_ = device_i32(*this, ny);
        Tensor dy_ = upload_16(*this, dt, dy16), dx_ = upload_16(*this, dt, dx0_16);  // dx starts as garbage
        settle();
        ops::maxpool2d_forward_cuda(dt, s, x_.raw_data(), y_.raw_data(), am_.data<int32_t>(), ctx.raw_stream());
        ops::maxpool2d_backward_cuda(dt, s, dy_.raw_data(), am_.data<int32_t>(), dx_.raw_data(),
                                        ctx.raw_stream());
        const auto y_gpu = download_16_values(*this, dt, y_);
        LS_REQUIRE_PARITY(y_gpu, rounded_16(dt, y_cpu), 0.0);
        CHECK(download_i32(*this, am_) == am_cpu);
        LS_REQUIRE_PARITY(download_16_values(*this, dt, dx_), rounded_16(dt, dx_cpu), 0.0);
        if (kind == 2)
          for (float v : y_gpu) REQUIRE(v < -1.f);  // padding never wins
      }
  }
}

TEST_CASE_METHOD(GpuFixture, "NHWC avgpool2d forward and backward match the CPU exactly", "[pool]") {
  uint64_t seed = 3010;
  for (const NhwcCase& c : kNhwcAvgCases) {
    CAPTURE(c.n, c.c, c.h, c.w, c.k, c.stride);
    const ops::Pool2dShape s = make_nhwc_shape(c);
    const int64_t nx = s.planes * s.h * s.w, ny = s.planes * s.oh * s.ow;
    const auto x = random_vector(nx, ++seed), dy = random_vector(ny, ++seed), dx0 = random_vector(nx, ++seed);

    std::vector<float> y_cpu(static_cast<size_t>(ny)), dx_cpu(static_cast<size_t>(nx));
    ops::avgpool2d_forward_cpu(s, x.data(), y_cpu.data());
    ops::avgpool2d_backward_cpu(s, dy.data(), dx_cpu.data());

    Tensor x_ = upload(Shape{nx}, x), y_ = device_zeros(Shape{ny});
    Tensor dy_ = upload(Shape{ny}, dy), dx_ = upload(Shape{nx}, dx0);  // dx starts as garbage
    settle();
    ops::avgpool2d_forward_cuda(DType::F32, s, x_.data<float>(), y_.data<float>(), ctx.raw_stream());
    ops::avgpool2d_backward_cuda(DType::F32, s, dy_.data<float>(), dx_.data<float>(), ctx.raw_stream());
    LS_REQUIRE_PARITY(download(y_), y_cpu, 0.0);
    LS_REQUIRE_PARITY(download(dx_), dx_cpu, 0.0);
  }
}

TEST_CASE_METHOD(GpuFixture, "NHWC avgpool2d 16-bit forward and backward match the CPU on 16-bit values exactly",
                 "[pool]") {
  for (const DType dt : k16BitTypes) {
    uint64_t seed = 3510;
    for (const NhwcCase& c : kNhwcAvgCases) {
      INFO(dtype_name(dt));
      CAPTURE(c.n, c.c, c.h, c.w, c.k, c.stride);
      const ops::Pool2dShape s = make_nhwc_shape(c);
      const int64_t nx = s.planes * s.h * s.w, ny = s.planes * s.oh * s.ow;
      const auto x16 = bits_16(dt, random_vector(nx, ++seed)), dy16 = bits_16(dt, random_vector(ny, ++seed));
      const auto dx0_16 = bits_16(dt, random_vector(nx, ++seed));
      const auto x = values_16(dt, x16), dy = values_16(dt, dy16);

      std::vector<float> y_cpu(static_cast<size_t>(ny)), dx_cpu(static_cast<size_t>(nx));
      ops::avgpool2d_forward_cpu(s, x.data(), y_cpu.data());
      ops::avgpool2d_backward_cpu(s, dy.data(), dx_cpu.data());

      Tensor x_ = upload_16(*this, dt, x16), y_ = device_zeros(Shape{ny}, dt);
      Tensor dy_ = upload_16(*this, dt, dy16), dx_ = upload_16(*this, dt, dx0_16);  // dx starts as garbage
      settle();
      ops::avgpool2d_forward_cuda(dt, s, x_.raw_data(), y_.raw_data(), ctx.raw_stream());
      ops::avgpool2d_backward_cuda(dt, s, dy_.raw_data(), dx_.raw_data(), ctx.raw_stream());
      LS_REQUIRE_PARITY(download_16_values(*this, dt, y_), rounded_16(dt, y_cpu), 0.0);
      LS_REQUIRE_PARITY(download_16_values(*this, dt, dx_), rounded_16(dt, dx_cpu), 0.0);
    }
  }
}

namespace {
struct NhwcGlobalCase {
  int64_t n, c, hw;
};
const NhwcGlobalCase kNhwcGlobalCases[] = {{7, 5, 49}, {3, 1, 1}, {2, 2048, 49}, {2, 300, 196}, {2, 3, 3136}};
}  // namespace

TEST_CASE_METHOD(GpuFixture, "NHWC global average pooling matches the CPU exactly", "[pool]") {
  uint64_t seed = 4010;
  for (const NhwcGlobalCase& c : kNhwcGlobalCases) {
    CAPTURE(c.n, c.c, c.hw);
    const int64_t nx = c.n * c.hw * c.c, ny = c.n * c.c;
    const auto x = random_vector(nx, ++seed), dy = random_vector(ny, ++seed);
    std::vector<float> y_cpu(static_cast<size_t>(ny)), dx_cpu(static_cast<size_t>(nx));
    ops::global_avgpool_nhwc_forward_cpu(c.n, c.c, c.hw, x.data(), y_cpu.data());
    ops::global_avgpool_nhwc_backward_cpu(c.n, c.c, c.hw, dy.data(), dx_cpu.data());

    Tensor x_ = upload(Shape{nx}, x), y_ = device_zeros(Shape{ny});
    Tensor dy_ = upload(Shape{ny}, dy), dx_ = upload(Shape{nx}, random_vector(nx, 1));  // dx starts as garbage
    settle();
    ops::global_avgpool_nhwc_forward_cuda(DType::F32, c.n, c.c, c.hw, x_.data<float>(), y_.data<float>(), ctx.raw_stream());
    ops::global_avgpool_nhwc_backward_cuda(DType::F32, c.n, c.c, c.hw, dy_.data<float>(), dx_.data<float>(), ctx.raw_stream());
    LS_REQUIRE_PARITY(download(y_), y_cpu, 0.0);  // the CPU's double sum, in the CPU's order
    LS_REQUIRE_PARITY(download(dx_), dx_cpu, 0.0);  // dy * (1/hw) in fp32, as on the CPU
  }
}

TEST_CASE_METHOD(GpuFixture, "NHWC global average pooling 16-bit matches the CPU on 16-bit values exactly",
                 "[pool]") {
  for (const DType dt : k16BitTypes) {
    uint64_t seed = 4510;
    for (const NhwcGlobalCase& c : kNhwcGlobalCases) {
      INFO(dtype_name(dt));
      CAPTURE(c.n, c.c, c.hw);
      const int64_t nx = c.n * c.hw * c.c, ny = c.n * c.c;
      const auto x16 = bits_16(dt, random_vector(nx, ++seed)), dy16 = bits_16(dt, random_vector(ny, ++seed));
      const auto x = values_16(dt, x16), dy = values_16(dt, dy16);
      std::vector<float> y_cpu(static_cast<size_t>(ny)), dx_cpu(static_cast<size_t>(nx));
      ops::global_avgpool_nhwc_forward_cpu(c.n, c.c, c.hw, x.data(), y_cpu.data());
      ops::global_avgpool_nhwc_backward_cpu(c.n, c.c, c.hw, dy.data(), dx_cpu.data());

      Tensor x_ = upload_16(*this, dt, x16), y_ = device_zeros(Shape{ny}, dt);
      Tensor dy_ = upload_16(*this, dt, dy16), dx_ = upload_16(*this, dt, bits_16(dt, random_vector(nx, 1)));
      settle();
      ops::global_avgpool_nhwc_forward_cuda(dt, c.n, c.c, c.hw, x_.raw_data(), y_.raw_data(), ctx.raw_stream());
      ops::global_avgpool_nhwc_backward_cuda(dt, c.n, c.c, c.hw, dy_.raw_data(), dx_.raw_data(),
                                                ctx.raw_stream());
      // The CPU's fp32 value (same double sum, same order), rounded once.
      LS_REQUIRE_PARITY(download_16_values(*this, dt, y_), rounded_16(dt, y_cpu), 0.0);
      LS_REQUIRE_PARITY(download_16_values(*this, dt, dx_), rounded_16(dt, dx_cpu), 0.0);
    }
  }
}

TEST_CASE_METHOD(GpuFixture, "NHWC pooling (cuda) accepts zero images and rejects partial images", "[pool]") {
  const cudaStream_t st = ctx.raw_stream();
  ops::Pool2dShape s = make_nhwc_shape({0, 4, 8, 8, 2, 2, 0});
  REQUIRE_NOTHROW(ops::maxpool2d_forward_cuda(DType::F32, s, nullptr, nullptr, nullptr, st));
  REQUIRE_NOTHROW(ops::maxpool2d_backward_cuda(DType::F32, s, nullptr, nullptr, nullptr, st));
  REQUIRE_NOTHROW(ops::avgpool2d_forward_cuda(DType::F32, s, nullptr, nullptr, st));
  REQUIRE_NOTHROW(ops::avgpool2d_backward_cuda(DType::F32, s, nullptr, nullptr, st));
  REQUIRE_NOTHROW(ops::global_avgpool_nhwc_forward_cuda(DType::F32, 0, 4, 49, nullptr, nullptr, st));
  REQUIRE_NOTHROW(ops::global_avgpool_nhwc_backward_cuda(DType::F32, 0, 4, 49, nullptr, nullptr, st));
  REQUIRE_NOTHROW(ops::global_avgpool_nhwc_forward_cuda(DType::F32, 3, 0, 49, nullptr, nullptr, st));
  REQUIRE_NOTHROW(ops::global_avgpool_nhwc_backward_cuda(DType::F32, 3, 0, 49, nullptr, nullptr, st));
  ctx.synchronize();
  REQUIRE(cudaGetLastError() == cudaSuccess);
  // 7 planes of 2 channels (checked before anything is launched), and no channels.
  s.planes = 7;
  s.c = 2;
  REQUIRE_THROWS(ops::maxpool2d_forward_cuda(DType::F32, s, nullptr, nullptr, nullptr, st));
  REQUIRE_THROWS(ops::maxpool2d_backward_cuda(DType::F32, s, nullptr, nullptr, nullptr, st));
  REQUIRE_THROWS(ops::avgpool2d_forward_cuda(DType::F32, s, nullptr, nullptr, st));
  REQUIRE_THROWS(ops::avgpool2d_backward_cuda(DType::F32, s, nullptr, nullptr, st));
  s.planes = 4;
  s.c = 0;
  REQUIRE_THROWS(ops::maxpool2d_forward_cuda(DType::BF16, s, nullptr, nullptr, nullptr, st));
  REQUIRE_THROWS(ops::avgpool2d_backward_cuda(DType::F16, s, nullptr, nullptr, st));
  for (const DType dt : {DType::F64, DType::I32, DType::U8}) {
    INFO(dtype_name(dt));
    REQUIRE_THROWS(ops::global_avgpool_nhwc_forward_cuda(dt, 0, 4, 49, nullptr, nullptr, st));
    REQUIRE_THROWS(ops::global_avgpool_nhwc_backward_cuda(dt, 0, 4, 49, nullptr, nullptr, st));
  }
}

// ---- layout transposes (ops/layout/layout_cuda.h) ----

namespace {

struct TransposeCase {
  int64_t n, c, hw;
};
const TransposeCase kTransposeCases[] = {
    {1, 1, 1},      {2, 3, 5},   {3, 64, 49}, {2, 33, 65},  // partial 32x32 tiles
    {1, 1, 100},    {4, 100, 1}, {2, 31, 97}, {1, 256, 3136},
    {70000, 2, 3},  // more items than one grid dimension holds (65535)
    {512, 64, 1},   // a 1x1 convolution's weight [OC, C, 1]: the same bytes either way, one copy
};

// Host transpose of 16-bit patterns, [n, c, hw] -> [n, hw, c] (to_nhwc) or back.
std::vector<uint16_t> host_transpose_16(int64_t n, int64_t c, int64_t hw, const std::vector<uint16_t>& v,
                                        bool to_nhwc) {
  std::vector<uint16_t> r(v.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < hw; ++i) {
        const size_t nchw = static_cast<size_t>((b * c + ch) * hw + i), nhwc = static_cast<size_t>((b * hw + i) * c + ch);
        if (to_nhwc)
          r[nhwc] = v[nchw];
        else
          r[nchw] = v[nhwc];
      }
  return r;
}

// Arbitrary 16-bit patterns (NaNs, infinities, subnormals and -0 among them).
std::vector<uint16_t> random_bits_16(int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (uint16_t& b : v) b = static_cast<uint16_t>(gen());
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE_METHOD(GpuFixture, "layout transposes F32 are bitwise the CPU transposes", "[pool]") {
  uint64_t seed = 6010;
  for (const TransposeCase& t : kTransposeCases) {
    CAPTURE(t.n, t.c, t.hw);
    const int64_t count = t.n * t.c * t.hw;
    auto src = random_vector(count, ++seed);
    src[0] = -0.f;  // bit patterns a copy must keep (count >= 1 in every case)
    if (count >= 4) {
      src[1] = std::numeric_limits<float>::quiet_NaN();
      src[2] = -std::numeric_limits<float>::infinity();
      src[3] = std::numeric_limits<float>::denorm_min();
    }
    std::vector<float> to_nhwc_cpu(static_cast<size_t>(count)), to_nchw_cpu(static_cast<size_t>(count));
    ops::nchw_to_nhwc_cpu(t.n, t.c, t.hw, src.data(), to_nhwc_cpu.data());
    ops::nhwc_to_nchw_cpu(t.n, t.c, t.hw, src.data(), to_nchw_cpu.data());

    Tensor src_ = upload(Shape{count}, src);
    Tensor a_ = upload(Shape{count}, random_vector(count, 1)), b_ = upload(Shape{count}, random_vector(count, 2));
    settle();
    ops::nchw_to_nhwc_cuda(DType::F32, t.n, t.c, t.hw, src_.raw_data(), a_.raw_data(), ctx.raw_stream());
    ops::nhwc_to_nchw_cuda(DType::F32, t.n, t.c, t.hw, src_.raw_data(), b_.raw_data(), ctx.raw_stream());
    REQUIRE(same_bits(download(a_), to_nhwc_cpu));
    REQUIRE(same_bits(download(b_), to_nchw_cpu));
    // Round trip on the GPU: nhwc -> nchw of the nhwc copy is the source.
    ops::nhwc_to_nchw_cuda(DType::F32, t.n, t.c, t.hw, a_.raw_data(), b_.raw_data(), ctx.raw_stream());
    REQUIRE(same_bits(download(b_), src));
  }
}

TEST_CASE_METHOD(GpuFixture, "layout transposes 16-bit are bitwise a host transpose of the bits", "[pool]") {
  for (const DType dt : k16BitTypes) {
    uint64_t seed = 6510;
    for (const TransposeCase& t : kTransposeCases) {
      INFO(dtype_name(dt));
      CAPTURE(t.n, t.c, t.hw);
      const int64_t count = t.n * t.c * t.hw;
      const auto src = random_bits_16(count, ++seed);  // any bit pattern: a copy keeps them all
      Tensor src_ = upload_16(*this, dt, src);
      Tensor a_ = upload_16(*this, dt, random_bits_16(count, 1)), b_ = upload_16(*this, dt, random_bits_16(count, 2));
      ops::nchw_to_nhwc_cuda(dt, t.n, t.c, t.hw, src_.raw_data(), a_.raw_data(), ctx.raw_stream());
      ops::nhwc_to_nchw_cuda(dt, t.n, t.c, t.hw, src_.raw_data(), b_.raw_data(), ctx.raw_stream());
      REQUIRE(download_16(*this, a_) == host_transpose_16(t.n, t.c, t.hw, src, true));
      REQUIRE(download_16(*this, b_) == host_transpose_16(t.n, t.c, t.hw, src, false));
      ops::nhwc_to_nchw_cuda(dt, t.n, t.c, t.hw, a_.raw_data(), b_.raw_data(), ctx.raw_stream());
      REQUIRE(download_16(*this, b_) == src);
    }
  }
}

TEST_CASE_METHOD(GpuFixture, "layout transposes accept empty sizes and reject other types", "[pool]") {
  const cudaStream_t st = ctx.raw_stream();
  for (const DType dt : {DType::F32, DType::BF16, DType::F16}) {
    INFO(dtype_name(dt));
    for (const TransposeCase& t : {TransposeCase{0, 3, 5}, TransposeCase{2, 0, 5}, TransposeCase{2, 3, 0}}) {
      REQUIRE_NOTHROW(ops::nchw_to_nhwc_cuda(dt, t.n, t.c, t.hw, nullptr, nullptr, st));
      REQUIRE_NOTHROW(ops::nhwc_to_nchw_cuda(dt, t.n, t.c, t.hw, nullptr, nullptr, st));
    }
  }
  ctx.synchronize();
  REQUIRE(cudaGetLastError() == cudaSuccess);
  // The type is checked first, so nothing is launched.
  for (const DType dt : {DType::F64, DType::I32, DType::U8}) {
    INFO(dtype_name(dt));
    REQUIRE_THROWS(ops::nchw_to_nhwc_cuda(dt, 0, 3, 5, nullptr, nullptr, st));
    REQUIRE_THROWS(ops::nhwc_to_nchw_cuda(dt, 2, 3, 5, nullptr, nullptr, st));
  }
}
