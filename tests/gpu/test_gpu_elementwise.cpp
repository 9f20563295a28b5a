// GPU elementwise ops (ops/elementwise/elementwise_cuda.h) against the CPU ops: ReLU,
// residual adds, scaling, dropout and GELU, out of place and in place, at sizes from
// one element to more than one grid-stride sweep (4096 blocks x 256 threads),
// in fp32 and in both 16-bit types, bf16 and IEEE fp16 (the data type first).
//
// Tolerance: none (GELU aside: its tanhf differs by ulps, see its test). Each
// output element is a single IEEE fp32 operation (or a compare and select) on
// the same inputs on both sides, with no multiply-add that could be contracted
// to an FMA, so GPU and CPU agree exactly; dropout
// masks come from the same integer hash (ops/elementwise/dropout_hash.h). Compared with ==,
// so +0 and -0 count as equal.
// 16-bit (each case runs for DType::BF16 and DType::F16): inputs are random
// values rounded to dt, uploaded as dt; the reference is the CPU op on the same
// values widened to fp32, rounded to dt (rounded_16: nearest even, the wire
// path's conversions). The GPU widens (exactly), evaluates the same single
// fp32 operation and rounds once to nearest even, as the reference does, so
// again tolerance none, for either type; 16-bit dropout masks equal the CPU
// (= fp32) masks.
// fp16 range: inputs are in [-1, 1) and outputs at most 10x that (dropout
// p = 0.9), far below fp16's 65504. About 6e-5 of the draws fall below fp16's
// smallest normal (2^-14) and become fp16 subnormals; they stay exact: widening
// an fp16 subnormal gives an fp32 normal, every fp32 result here (a select, a
// sum of two fp16 values, a product by keep / (1 - p) >= 1) is 0 or at least
// 2^-24 in magnitude, so no fp32 subnormal (or flush to zero) arises, and the
// final rounding into fp16's subnormal range is the same IEEE round to nearest
// even on the GPU (__float2half_rn) and on the host (_Float16).
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>
#include <string>

#include "cuda/check.h"
#include "gpu_test_util.h"
#include "ops/elementwise/elementwise_cpu.h"
#include "ops/elementwise/elementwise_cuda.h"

using namespace lockstep;
using namespace lockstep::ops;
using namespace lockstep::testing;

namespace {

// 1000003 is odd and prime; 3000017 needs several passes of the grid-stride loop.
const int64_t kSizes[] = {1, 2, 255, 257, 4099, 1000003, 3000017};

// Index of the first element where a and b differ, or -1.
template <typename T>
int64_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i])) return static_cast<int64_t>(i);
  return -1;
}

template <typename T>
std::string describe_difference(const std::vector<T>& gpu, const std::vector<T>& cpu, int64_t at) {
  if (at < 0) return "no difference";
  std::ostringstream os;
  os.precision(9);
  os << "first difference at element " << at << " of " << cpu.size() << ": gpu " << +gpu[at] << ", cpu "
     << +cpu[at];
  return os.str();
}

#define REQUIRE_EQUAL_VECTORS(gpu, cpu)                                                          \
  do {                                                                                           \
    const auto& ls_gpu_ = (gpu);                                                                 \
    const auto& ls_cpu_ = (cpu);                                                                 \
    const int64_t ls_at_ = first_difference(ls_gpu_, ls_cpu_);                                   \
    INFO(#gpu " vs " #cpu ": " << describe_difference(ls_gpu_, ls_cpu_, ls_at_));                \
    REQUIRE(ls_at_ == -1);                                                                       \
  } while (0)

std::vector<uint8_t> download_u8(GpuFixture& f, const Tensor& d) {
  f.ctx.synchronize();
  const Tensor h = d.to(cpu_allocator());
  const uint8_t* p = h.data<uint8_t>();
  return std::vector<uint8_t>(p, p + h.numel());
}

// A 16-bit (dt) device tensor's values, widened to fp32 (exact).
std::vector<float> download_16_values(GpuFixture& f, DType dt, const Tensor& t) {
  return values_16(dt, download_16(f, t));
}

constexpr DType k16BitTypes[] = {DType::BF16, DType::F16};

Tensor upload_u8(GpuFixture& f, const std::vector<uint8_t>& v) {
  Tensor h = Tensor::zeros(Shape{static_cast<int64_t>(v.size())}, DType::U8);
  std::copy(v.begin(), v.end(), h.data<uint8_t>());
  return h.to(f.ctx.allocator());
}

}  // namespace

TEST_CASE_METHOD(GpuFixture, "GPU ReLU forward and backward equal the CPU ops", "[elementwise]") {
  const cudaStream_t s = ctx.raw_stream();
  for (const int64_t n : kSizes) {
    INFO("n = " << n);
    const auto x = random_vector(n, 100 + n);
    const auto dy = random_vector(n, 200 + n);
    std::vector<float> y_cpu(n), dx_cpu(n);
    relu_forward_cpu(n, x.data(), y_cpu.data());
    relu_backward_cpu(n, y_cpu.data(), dy.data(), dx_cpu.data());

    Tensor dx_in = upload(Shape{n}, x), d_y = device_zeros(Shape{n});
    relu_forward_cuda(DType::F32, n, dx_in.data<float>(), d_y.data<float>(), s);
    REQUIRE_EQUAL_VECTORS(download(d_y), y_cpu);
    relu_forward_cuda(DType::F32, n, dx_in.data<float>(), dx_in.data<float>(), s);  // in place
    REQUIRE_EQUAL_VECTORS(download(dx_in), y_cpu);

    Tensor d_dy = upload(Shape{n}, dy), d_dx = device_zeros(Shape{n});
    relu_backward_cuda(DType::F32, n, d_y.data<float>(), d_dy.data<float>(), d_dx.data<float>(), s);
    REQUIRE_EQUAL_VECTORS(download(d_dx), dx_cpu);
    relu_backward_cuda(DType::F32, n, d_y.data<float>(), d_dy.data<float>(), d_dy.data<float>(), s);  // dx = dy in place
    REQUIRE_EQUAL_VECTORS(download(d_dy), dx_cpu);
  }
}

TEST_CASE_METHOD(GpuFixture, "GPU add_relu, add_inplace and scale equal the CPU results", "[elementwise]") {
  const cudaStream_t s = ctx.raw_stream();
  for (const int64_t n : kSizes) {
    INFO("n = " << n);
    const auto a = random_vector(n, 300 + n);
    const auto b = random_vector(n, 400 + n);
    std::vector<float> y_cpu(n);
    add_relu_cpu(n, a.data(), b.data(), y_cpu.data());

    Tensor da = upload(Shape{n}, a), db = upload(Shape{n}, b), dy = device_zeros(Shape{n});
    add_relu_cuda(DType::F32, n, da.data<float>(), db.data<float>(), dy.data<float>(), s);
    REQUIRE_EQUAL_VECTORS(download(dy), y_cpu);
    add_relu_cuda(DType::F32, n, da.data<float>(), db.data<float>(), da.data<float>(), s);  // y = a
    REQUIRE_EQUAL_VECTORS(download(da), y_cpu);
    da = upload(Shape{n}, a);
    add_relu_cuda(DType::F32, n, da.data<float>(), db.data<float>(), db.data<float>(), s);  // y = b
    REQUIRE_EQUAL_VECTORS(download(db), y_cpu);

    std::vector<float> sum_cpu = b;
    add_inplace_cpu(n, a.data(), sum_cpu.data());
    db = upload(Shape{n}, b);
    add_inplace_cuda(DType::F32, n, da.data<float>(), db.data<float>(), s);
    REQUIRE_EQUAL_VECTORS(download(db), sum_cpu);
    std::vector<float> twice_cpu = a;
    add_inplace_cpu(n, a.data(), twice_cpu.data());
    add_inplace_cuda(DType::F32, n, da.data<float>(), da.data<float>(), s);  // x = y: doubles
    REQUIRE_EQUAL_VECTORS(download(da), twice_cpu);

    // scale has no CPU op: the reference is the same single multiply on the host.
    for (const float alpha : {0.f, -1.f, 0.125f, 1.f / 3.f}) {
      std::vector<float> scaled = b;
      for (float& v : scaled) v *= alpha;
      Tensor dx = upload(Shape{n}, b);
      scale_cuda(n, alpha, dx.data<float>(), s);
      REQUIRE_EQUAL_VECTORS(download(dx), scaled);
    }
  }
}

TEST_CASE_METHOD(GpuFixture, "GPU dropout masks and outputs equal the CPU ones exactly", "[elementwise]") {
  const cudaStream_t s = ctx.raw_stream();
  struct Case {
    int64_t rows, row_len, row0;
  };
  // Row lengths that are multiples of nothing in particular; row0 shifts the global sample index.
  const Case cases[] = {{1, 1, 0}, {1, 1000003, 7}, {5, 37, 3}, {64, 1001, 1000}, {1000003, 1, 12345},
                        {3, 1000003, 0}, {129, 2311, 99991}};
  for (const Case& c : cases)
    for (const float p : {0.f, 0.1f, 0.5f, 0.9f})
      for (const uint64_t key : {uint64_t{1}, uint64_t{0xDEADBEEFCAFEF00Dull}}) {
        const int64_t n = c.rows * c.row_len;
        INFO("rows " << c.rows << " row_len " << c.row_len << " row0 " << c.row0 << " p " << p << " key " << key);
        const auto x = random_vector(n, 500 + n);
        std::vector<float> y_cpu(n);
        std::vector<uint8_t> mask_cpu(n);
        dropout_forward_cpu(c.rows, c.row_len, c.row0, key, p, x.data(), y_cpu.data(), mask_cpu.data());

        Tensor dx = upload(Shape{n}, x), dy = device_zeros(Shape{n});
        Tensor dmask = device_zeros(Shape{n}, DType::U8);
        dropout_forward_cuda(DType::F32, c.rows, c.row_len, c.row0, key, p, dx.data<float>(), dy.data<float>(),
                             dmask.data<uint8_t>(), s);
        REQUIRE_EQUAL_VECTORS(download_u8(*this, dmask), mask_cpu);
        REQUIRE_EQUAL_VECTORS(download(dy), y_cpu);

        // In place (y = x), with a stale mask that must be fully overwritten.
        Tensor dmask2 = upload_u8(*this, std::vector<uint8_t>(n, 7));
        dropout_forward_cuda(DType::F32, c.rows, c.row_len, c.row0, key, p, dx.data<float>(), dx.data<float>(),
                             dmask2.data<uint8_t>(), s);
        REQUIRE_EQUAL_VECTORS(download_u8(*this, dmask2), mask_cpu);
        REQUIRE_EQUAL_VECTORS(download(dx), y_cpu);

        // Backward from the CPU mask, out of place and in place (dx = dy).
        const auto g = random_vector(n, 600 + n);
        std::vector<float> dx_cpu(n);
        dropout_backward_cpu(n, p, mask_cpu.data(), g.data(), dx_cpu.data());
        Tensor dg = upload(Shape{n}, g), dgx = device_zeros(Shape{n});
        dropout_backward_cuda(DType::F32, n, p, dmask.data<uint8_t>(), dg.data<float>(), dgx.data<float>(), s);
        REQUIRE_EQUAL_VECTORS(download(dgx), dx_cpu);
        dropout_backward_cuda(DType::F32, n, p, dmask.data<uint8_t>(), dg.data<float>(), dg.data<float>(), s);
        REQUIRE_EQUAL_VECTORS(download(dg), dx_cpu);
      }
}

TEST_CASE_METHOD(GpuFixture, "GPU dropout: a sample's mask does not depend on how the batch is split",
                 "[elementwise]") {
  const cudaStream_t s = ctx.raw_stream();
  const int64_t rows = 100, row_len = 333, split = 37, n = rows * row_len;
  const uint64_t key = 42;
  const float p = 0.3f;
  const auto x = random_vector(n, 700);
  Tensor dx = upload(Shape{n}, x), dy = device_zeros(Shape{n});
  Tensor whole = device_zeros(Shape{n}, DType::U8), parts = device_zeros(Shape{n}, DType::U8);
  dropout_forward_cuda(DType::F32, rows, row_len, 0, key, p, dx.data<float>(), dy.data<float>(), whole.data<uint8_t>(), s);
  dropout_forward_cuda(DType::F32, split, row_len, 0, key, p, dx.data<float>(), dy.data<float>(), parts.data<uint8_t>(), s);
  dropout_forward_cuda(DType::F32, rows - split, row_len, split, key, p, dx.data<float>() + split * row_len,
                       dy.data<float>() + split * row_len, parts.data<uint8_t>() + split * row_len, s);
  const auto m_whole = download_u8(*this, whole), m_parts = download_u8(*this, parts);
  REQUIRE_EQUAL_VECTORS(m_parts, m_whole);
  // About 1 - p of the elements are kept.
  const auto kept = std::count(m_whole.begin(), m_whole.end(), uint8_t{1});
  CHECK(std::abs(static_cast<double>(kept) / n - (1 - p)) < 0.02);
}

TEST_CASE_METHOD(GpuFixture, "GPU 16-bit ReLU forward and backward equal the CPU ops on 16-bit values, rounded",
                 "[elementwise]") {
  const cudaStream_t s = ctx.raw_stream();
  for (const DType dt : k16BitTypes)
    for (const int64_t n : kSizes) {
      INFO(dtype_name(dt) << ", n = " << n);
      const auto x16 = bits_16(dt, random_vector(n, 100 + n));
      const auto dy16 = bits_16(dt, random_vector(n, 200 + n));
      const auto x = values_16(dt, x16), dy = values_16(dt, dy16);
      std::vector<float> y_cpu(n), dx_cpu(n);
      relu_forward_cpu(n, x.data(), y_cpu.data());
      relu_backward_cpu(n, y_cpu.data(), dy.data(), dx_cpu.data());  // y_cpu holds dt values: the GPU's y
      const auto y_ref = rounded_16(dt, y_cpu), dx_ref = rounded_16(dt, dx_cpu);  // tolerance none

      Tensor dx_in = upload_16(*this, dt, x16), d_y = device_zeros(Shape{n}, dt);
      relu_forward_cuda(dt, n, dx_in.raw_data(), d_y.raw_data(), s);
      REQUIRE_EQUAL_VECTORS(download_16_values(*this, dt, d_y), y_ref);
      relu_forward_cuda(dt, n, dx_in.raw_data(), dx_in.raw_data(), s);  // in place
      REQUIRE_EQUAL_VECTORS(download_16_values(*this, dt, dx_in), y_ref);

      Tensor d_dy = upload_16(*this, dt, dy16), d_dx = device_zeros(Shape{n}, dt);
      relu_backward_cuda(dt, n, d_y.raw_data(), d_dy.raw_data(), d_dx.raw_data(), s);
      REQUIRE_EQUAL_VECTORS(download_16_values(*this, dt, d_dx), dx_ref);
      relu_backward_cuda(dt, n, d_y.raw_data(), d_dy.raw_data(), d_dy.raw_data(), s);  // dx = dy in place
      REQUIRE_EQUAL_VECTORS(download_16_values(*this, dt, d_dy), dx_ref);
    }
}

TEST_CASE_METHOD(GpuFixture, "GPU 16-bit add_relu and add_inplace equal the CPU results, rounded", "[elementwise]") {
  const cudaStream_t s = ctx.raw_stream();
  for (const DType dt : k16BitTypes)
    for (const int64_t n : kSizes) {
      INFO(dtype_name(dt) << ", n = " << n);
      const auto a16 = bits_16(dt, random_vector(n, 300 + n));
      const auto b16 = bits_16(dt, random_vector(n, 400 + n));
      const auto a = values_16(dt, a16), b = values_16(dt, b16);
      std::vector<float> y_cpu(n);
      add_relu_cpu(n, a.data(), b.data(), y_cpu.data());
      const auto y_ref = rounded_16(dt, y_cpu);  // a + b in fp32, ReLU, one rounding: tolerance none

      Tensor da = upload_16(*this, dt, a16), db = upload_16(*this, dt, b16), dy = device_zeros(Shape{n}, dt);
      add_relu_cuda(dt, n, da.raw_data(), db.raw_data(), dy.raw_data(), s);
      REQUIRE_EQUAL_VECTORS(download_16_values(*this, dt, dy), y_ref);
      add_relu_cuda(dt, n, da.raw_data(), db.raw_data(), da.raw_data(), s);  // y = a
      REQUIRE_EQUAL_VECTORS(download_16_values(*this, dt, da), y_ref);
      da = upload_16(*this, dt, a16);
      add_relu_cuda(dt, n, da.raw_data(), db.raw_data(), db.raw_data(), s);  // y = b
      REQUIRE_EQUAL_VECTORS(download_16_values(*this, dt, db), y_ref);

      std::vector<float> sum_cpu = b;
      add_inplace_cpu(n, a.data(), sum_cpu.data());
      db = upload_16(*this, dt, b16);
      add_inplace_cuda(dt, n, da.raw_data(), db.raw_data(), s);
      REQUIRE_EQUAL_VECTORS(download_16_values(*this, dt, db), rounded_16(dt, sum_cpu));
      std::vector<float> twice_cpu = a;
      add_inplace_cpu(n, a.data(), twice_cpu.data());
      add_inplace_cuda(dt, n, da.raw_data(), da.raw_data(), s);  // x = y: doubles
      REQUIRE_EQUAL_VECTORS(download_16_values(*this, dt, da), rounded_16(dt, twice_cpu));
    }
}

TEST_CASE_METHOD(GpuFixture, "GPU 16-bit dropout: masks equal the CPU ones, outputs the CPU's rounded",
                 "[elementwise]") {
  const cudaStream_t s = ctx.raw_stream();
  struct Case {
    int64_t rows, row_len, row0;
  };
  const Case cases[] = {{1, 1, 0}, {1, 1000003, 7}, {5, 37, 3}, {64, 1001, 1000}, {1000003, 1, 12345},
                        {3, 1000003, 0}, {129, 2311, 99991}};
  for (const DType dt : k16BitTypes)
    for (const Case& c : cases)
      for (const float p : {0.f, 0.1f, 0.5f, 0.9f})
        for (const uint64_t key : {uint64_t{1}, uint64_t{0xDEADBEEFCAFEF00Dull}}) {
          const int64_t n = c.rows * c.row_len;
          INFO(dtype_name(dt) << ", rows " << c.rows << " row_len " << c.row_len << " row0 " << c.row0 << " p " << p
                              << " key " << key);
          const auto x16 = bits_16(dt, random_vector(n, 500 + n));
          const auto x = values_16(dt, x16);
          std::vector<float> y_cpu(n);
          std::vector<uint8_t> mask_cpu(n);
          dropout_forward_cpu(c.rows, c.row_len, c.row0, key, p, x.data(), y_cpu.data(), mask_cpu.data());
          const auto y_ref = rounded_16(dt, y_cpu);  // x * (keep / (1 - p)) in fp32, one rounding: tolerance none

          Tensor dx = upload_16(*this, dt, x16), dy = device_zeros(Shape{n}, dt);
          Tensor dmask = device_zeros(Shape{n}, DType::U8);
          dropout_forward_cuda(dt, c.rows, c.row_len, c.row0, key, p, dx.raw_data(), dy.raw_data(),
                                  dmask.data<uint8_t>(), s);
          REQUIRE_EQUAL_VECTORS(download_u8(*this, dmask), mask_cpu);
          REQUIRE_EQUAL_VECTORS(download_16_values(*this, dt, dy), y_ref);

          // In place (y = x), with a stale mask that must be fully overwritten.
          Tensor dmask2 = upload_u8(*this, std::vector<uint8_t>(n, 7));
          dropout_forward_cuda(dt, c.rows, c.row_len, c.row0, key, p, dx.raw_data(), dx.raw_data(),
                                  dmask2.data<uint8_t>(), s);
          REQUIRE_EQUAL_VECTORS(download_u8(*this, dmask2), mask_cpu);
          REQUIRE_EQUAL_VECTORS(download_16_values(*this, dt, dx), y_ref);

          // Backward from the mask, out of place and in place (dx = dy).
          const auto g16 = bits_16(dt, random_vector(n, 600 + n));
          const auto g = values_16(dt, g16);
          std::vector<float> dx_cpu(n);
          dropout_backward_cpu(n, p, mask_cpu.data(), g.data(), dx_cpu.data());
          const auto dx_ref = rounded_16(dt, dx_cpu);
          Tensor dg = upload_16(*this, dt, g16), dgx = device_zeros(Shape{n}, dt);
          dropout_backward_cuda(dt, n, p, dmask.data<uint8_t>(), dg.raw_data(), dgx.raw_data(), s);
          REQUIRE_EQUAL_VECTORS(download_16_values(*this, dt, dgx), dx_ref);
          dropout_backward_cuda(dt, n, p, dmask.data<uint8_t>(), dg.raw_data(), dg.raw_data(), s);
          REQUIRE_EQUAL_VECTORS(download_16_values(*this, dt, dg), dx_ref);
        }
}

// GELU's tanh is CUDA's tanhf (a few ulps from the host's libm): fp32 results
// agree with the CPU's within 1e-6 relative; 16-bit ones are the CPU's value on
// the widened inputs rounded once, so within one rounding of dt.
TEST_CASE_METHOD(GpuFixture, "GPU GELU forward and backward match the CPU op in fp32, bf16 and fp16", "[elementwise]") {
  const cudaStream_t s = ctx.raw_stream();
  for (const int64_t n : kSizes) {
    INFO("n = " << n);
    const auto x = random_vector(n, 300 + n, -4.f, 4.f);
    const auto dy = random_vector(n, 400 + n);
    std::vector<float> y_cpu(n), dx_cpu(n);
    gelu_forward_cpu(n, x.data(), y_cpu.data());
    gelu_backward_cpu(n, x.data(), dy.data(), dx_cpu.data());
    Tensor d_x = upload(Shape{n}, x), d_y = device_zeros(Shape{n}), d_dy = upload(Shape{n}, dy),
           d_dx = device_zeros(Shape{n});
    gelu_forward_cuda(DType::F32, n, d_x.raw_data(), d_y.raw_data(), s);
    gelu_backward_cuda(DType::F32, n, d_x.raw_data(), d_dy.raw_data(), d_dx.raw_data(), s);
    LS_REQUIRE_PARITY(download(d_y), y_cpu, 1e-6);
    LS_REQUIRE_PARITY(download(d_dx), dx_cpu, 1e-6);
  }
  for (const DType dt : k16BitTypes)
    for (const int64_t n : kSizes) {
      INFO(dtype_name(dt) << ", n = " << n);
      const auto x16 = bits_16(dt, random_vector(n, 300 + n, -4.f, 4.f));
      const auto dy16 = bits_16(dt, random_vector(n, 400 + n));
      const auto x = values_16(dt, x16), dy = values_16(dt, dy16);
      std::vector<float> y_cpu(n), dx_cpu(n);
      gelu_forward_cpu(n, x.data(), y_cpu.data());
      gelu_backward_cpu(n, x.data(), dy.data(), dx_cpu.data());
      Tensor d_x = upload_16(*this, dt, x16), d_y = device_zeros(Shape{n}, dt), d_dy = upload_16(*this, dt, dy16),
             d_dx = device_zeros(Shape{n}, dt);
      gelu_forward_cuda(dt, n, d_x.raw_data(), d_y.raw_data(), s);
      gelu_backward_cuda(dt, n, d_x.raw_data(), d_dy.raw_data(), d_dx.raw_data(), s);
      const double tol = dt == DType::BF16 ? 1.0 / 128 : 1.0 / 1024;  // one rounding of dt, and a few fp32 ulps
      LS_REQUIRE_PARITY(download_16_values(*this, dt, d_y), y_cpu, tol);
      LS_REQUIRE_PARITY(download_16_values(*this, dt, d_dx), dx_cpu, tol);
    }
}

TEST_CASE_METHOD(GpuFixture, "GPU elementwise ops accept n = 0", "[elementwise]") {
  const cudaStream_t s = ctx.raw_stream();
  relu_forward_cuda(DType::F32, 0, nullptr, nullptr, s);
  relu_backward_cuda(DType::F32, 0, nullptr, nullptr, nullptr, s);
  add_relu_cuda(DType::F32, 0, nullptr, nullptr, nullptr, s);
  add_inplace_cuda(DType::F32, 0, nullptr, nullptr, s);
  scale_cuda(0, 2.f, nullptr, s);
  gelu_forward_cuda(DType::F32, 0, nullptr, nullptr, s);
  gelu_backward_cuda(DType::F32, 0, nullptr, nullptr, nullptr, s);
  dropout_forward_cuda(DType::F32, 0, 10, 0, 1, 0.5f, nullptr, nullptr, nullptr, s);
  dropout_forward_cuda(DType::F32, 10, 0, 0, 1, 0.5f, nullptr, nullptr, nullptr, s);
  dropout_backward_cuda(DType::F32, 0, 0.5f, nullptr, nullptr, nullptr, s);
  for (const DType dt : k16BitTypes) {
    INFO(dtype_name(dt));
    relu_forward_cuda(dt, 0, nullptr, nullptr, s);
    relu_backward_cuda(dt, 0, nullptr, nullptr, nullptr, s);
    add_relu_cuda(dt, 0, nullptr, nullptr, nullptr, s);
    add_inplace_cuda(dt, 0, nullptr, nullptr, s);
    dropout_forward_cuda(dt, 0, 10, 0, 1, 0.5f, nullptr, nullptr, nullptr, s);
    dropout_forward_cuda(dt, 10, 0, 0, 1, 0.5f, nullptr, nullptr, nullptr, s);
    dropout_backward_cuda(dt, 0, 0.5f, nullptr, nullptr, nullptr, s);
  }
  ctx.synchronize();
  LS_CUDA_CHECK(cudaGetLastError());
}

TEST_CASE_METHOD(GpuFixture, "GPU elementwise ops reject types other than F32, BF16 and F16", "[elementwise]") {
  // dt is checked before anything else, so n = 0 and null pointers suffice; nothing is launched.
  const cudaStream_t s = ctx.raw_stream();
  for (const DType dt : {DType::F64, DType::I32, DType::U8}) {
    INFO(dtype_name(dt));
    REQUIRE_THROWS(relu_forward_cuda(dt, 0, nullptr, nullptr, s));
    REQUIRE_THROWS(relu_backward_cuda(dt, 0, nullptr, nullptr, nullptr, s));
    REQUIRE_THROWS(add_relu_cuda(dt, 0, nullptr, nullptr, nullptr, s));
    REQUIRE_THROWS(add_inplace_cuda(dt, 0, nullptr, nullptr, s));
    REQUIRE_THROWS(gelu_forward_cuda(dt, 0, nullptr, nullptr, s));
    REQUIRE_THROWS(gelu_backward_cuda(dt, 0, nullptr, nullptr, nullptr, s));
    REQUIRE_THROWS(dropout_forward_cuda(dt, 0, 10, 0, 1, 0.5f, nullptr, nullptr, nullptr, s));
    REQUIRE_THROWS(dropout_backward_cuda(dt, 0, 0.5f, nullptr, nullptr, nullptr, s));
  }
}
