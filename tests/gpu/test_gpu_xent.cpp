// GPU softmax cross-entropy (ops/loss/softmax_xent_cuda.h) against the CPU op:
// loss sums, correct counts (argmax ties included) and gradients, with label
// smoothing 0 and 0.1, from one class to very wide rows and from one row to
// more rows than the row grid (65535 blocks); fp32 logits, and 16-bit logits,
// bf16 and fp16, one section each (dt-rounded values uploaded as dt, the CPU
// op run in fp32 on the same values) with dt gradients; the device loss scale
// (scale_dev).
//
// Tolerances:
//  - correct counts: exact (the argmax is a comparison; ties go to the first index).
//  - loss sums: 1e-9 relative. Like the CPU op the GPU sums exp() and the loss
//    in fp64 from the same fp32 max-subtracted logits; only the summation order
//    (a tree instead of a left-to-right loop) and the last bit of the fp64
//    exp/log differ, i.e. ~1e-15 relative, far inside 1e-9.
//  - gradients: 1e-6 (LS_REQUIRE_PARITY: relative above 1, absolute below). They
//    are fp32: CUDA's expf is within 2 ulp (the CPU's within 1), the row sum is
//    added in another order, and nvcc contracts d * inv - off into an FMA. A
//    simulation of those effects stays below 2.5e-7; a wrong formula is off by
//    far more (eps / C = 1e-2 for C = 10).
//  - 16-bit logits (dt): correct counts exact and loss sums 1e-9, as above
//    (each logit is widened exactly, then the fp32 path's math). The logits lie
//    in [-5, 5]: inside fp16's range (max 65504) with room to spare; the
//    gradients lie in [-1, 1] (|softmax - q| <= 1, scale <= 1).
//  - dt gradients (the fp32 path's values, rounded to dt once) against the
//    CPU's fp32 gradients rounded to dt: one dt ulp, 2^-7 for bf16 (8
//    significant bits), 2^-10 for fp16 (11), i.e. 2^(half_ulp_exponent + 1).
//    The fp32 values can differ (1e-6 above), and where that straddles a dt
//    rounding boundary the two roundings are one dt ulp apart: at most 2^-7
//    (bf16) / 2^-10 (fp16) of the value; below 1 in magnitude the comparison
//    is absolute, and the bound is then >= 2 ulps. As that is loose for small
//    gradients, also against the CPU's unrounded fp32 gradients: within 1e-6
//    (the fp32 tolerance) plus half a dt ulp, 2^-8 |gpu| (bf16) or 2^-11 |gpu|
//    (fp16), the bound on the one rounding to dt. Tiny gradients (wide rows)
//    are fp16 subnormals below 2^-14: their rounding is at most 2^-25
//    absolute, inside the 1e-6.
//  - in place (dlogits over the logits): bitwise the out-of-place result.
//  - device loss scale: exact. *scale_dev = 1024 = 2^10 multiplies the fp32
//    factor, inv, off and on by 2^10 exactly, so every fp32 gradient is
//    exactly 1024 times the null-scale_dev one as long as neither is
//    subnormal; the 16-bit results also as long as the unscaled ones are
//    normal in dt (>= 2^-14 for fp16) and the scaled ones below 65504: the
//    test's shape guarantees both (see there). *scale_dev = 1 gives bitwise
//    the null result.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "cuda/check.h"
#include "gpu_test_util.h"
#include "ops/loss/softmax_xent_cpu.h"
#include "ops/loss/softmax_xent_cuda.h"

using namespace lockstep;
using namespace lockstep::ops;
using namespace lockstep::testing;

namespace {

template <typename T>
Tensor upload_typed(GpuFixture& f, const std::vector<T>& v) {
  Tensor h = Tensor::zeros(Shape{static_cast<int64_t>(v.size())}, dtype_of<T>());
  std::copy(v.begin(), v.end(), h.data<T>());
  return h.to(f.ctx.allocator());
}

template <typename T>
std::vector<T> download_typed(GpuFixture& f, const Tensor& d) {
  f.ctx.synchronize();
  const Tensor h = d.to(cpu_allocator());
  const T* p = h.data<T>();
  return std::vector<T>(p, p + h.numel());
}

std::vector<int32_t> random_labels(int64_t b, int64_t c, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int64_t> dist(0, c - 1);
  std::vector<int32_t> v(static_cast<size_t>(b));
  for (auto& l : v) l = static_cast<int32_t>(dist(gen));
  return v;
}

// Logits in [-5, 5]; `ties`: rounded to integers in [-2, 2], so most rows have
// several equal maxima and the first-index rule decides the argmax.
std::vector<float> random_logits(int64_t n, uint64_t seed, bool ties) {
  auto v = random_vector(n, seed, -5.f, 5.f);
  if (ties)
    for (float& x : v) x = std::round(x * 0.4f);
  return v;
}

constexpr double kGradTol = 1e-6;
// One dt ulp relative to the value (see above): 2^-7 for bf16, 2^-10 for fp16.
double grad_tol_16(DType dt) { return std::ldexp(1.0, half_ulp_exponent(dt) + 1); }

struct Shape2 {
  int64_t b, c;
};

// b up to 100003 rows (more than the 65535-block row grid), c up to 1000003
// classes (wider than a block).
const Shape2 kShapes[] = {{1, 1}, {1, 10}, {7, 10}, {256, 10}, {33, 1000}, {100003, 3}, {3, 1000003}};

void require_loss_close(double gpu, double cpu, double tol) {
  const double rel = std::abs(gpu - cpu) / std::max(1.0, std::abs(cpu));
  INFO("loss sum gpu " << gpu << " cpu " << cpu << ": rel diff " << rel << " (tolerance " << tol << ")");
  REQUIRE(rel <= tol);
}

}  // namespace

TEST_CASE_METHOD(GpuFixture, "GPU softmax cross-entropy forward matches the CPU loss sum and accuracy", "[xent]") {
  const cudaStream_t s = ctx.raw_stream();
  for (const Shape2 sh : kShapes)
    for (const float smoothing : {0.f, 0.1f})
      for (const bool ties : {false, true}) {
        const int64_t b = sh.b, c = sh.c;
        INFO("b " << b << " c " << c << " smoothing " << smoothing << " ties " << ties);
        const auto logits = random_logits(b * c, 1000 + b * 7 + c, ties);
        const auto labels = random_labels(b, c, 2000 + b + c);
        const XentResult cpu = softmax_xent_forward_cpu(b, c, logits.data(), labels.data(), smoothing);

        Tensor dz = upload(Shape{b, c}, logits);
        Tensor dl = upload_typed(*this, labels);
        Tensor row_loss = device_zeros(Shape{b}, DType::F64), row_correct = device_zeros(Shape{b}, DType::I32);
        // Accumulates into what is there: start from (1.5, 3) and add the batch twice.
        Tensor loss_sum = upload_typed(*this, std::vector<double>{1.5});
        Tensor correct = upload_typed(*this, std::vector<int64_t>{3});
        for (int rep = 0; rep < 2; ++rep)
          softmax_xent_forward_cuda(DType::F32, b, c, dz.data<float>(), dl.data<int32_t>(), smoothing, row_loss.data<double>(),
                                    row_correct.data<int32_t>(), loss_sum.data<double>(), correct.data<int64_t>(), s);
        const double gpu_loss = download_typed<double>(*this, loss_sum)[0];
        const int64_t gpu_correct = download_typed<int64_t>(*this, correct)[0];
        CHECK(gpu_correct == 3 + 2 * cpu.correct);
        require_loss_close(gpu_loss - 1.5, 2 * cpu.loss_sum, 1e-9);

        // Per-row results: each row's loss as the CPU op computes it for that row alone.
        const auto rows = download_typed<double>(*this, row_loss);
        const auto hits = download_typed<int32_t>(*this, row_correct);
        for (int64_t i = 0; i < std::min<int64_t>(b, 50); ++i) {
          const XentResult one = softmax_xent_forward_cpu(1, c, logits.data() + i * c, labels.data() + i, smoothing);
          INFO("row " << i);
          CHECK(hits[i] == one.correct);
          require_loss_close(rows[i], one.loss_sum, 1e-9);
        }

        // Deterministic: a second run from zero gives bitwise the same sum.
        Tensor again = device_zeros(Shape{1}, DType::F64), again_correct = device_zeros(Shape{1}, DType::I64);
        softmax_xent_forward_cuda(DType::F32, b, c, dz.data<float>(), dl.data<int32_t>(), smoothing, row_loss.data<double>(),
                                  row_correct.data<int32_t>(), again.data<double>(), again_correct.data<int64_t>(), s);
        const double once = download_typed<double>(*this, again)[0];
        softmax_xent_forward_cuda(DType::F32, b, c, dz.data<float>(), dl.data<int32_t>(), smoothing, row_loss.data<double>(),
                                  row_correct.data<int32_t>(), again.data<double>(), again_correct.data<int64_t>(), s);
        CHECK(download_typed<double>(*this, again)[0] == 2 * once);  // x + x is exact
        CHECK(download_typed<int64_t>(*this, again_correct)[0] == 2 * cpu.correct);
      }
}

TEST_CASE_METHOD(GpuFixture, "GPU softmax cross-entropy backward matches the CPU gradients", "[xent]") {
  const cudaStream_t s = ctx.raw_stream();
  for (const Shape2 sh : kShapes)
    for (const float smoothing : {0.f, 0.1f})
      for (const float scale : {1.f, 0.25f}) {
        const int64_t b = sh.b, c = sh.c;
        INFO("b " << b << " c " << c << " smoothing " << smoothing << " scale " << scale);
        const auto logits = random_logits(b * c, 3000 + b * 7 + c, /*ties=*/false);
        const auto labels = random_labels(b, c, 4000 + b + c);
        std::vector<float> d_cpu(static_cast<size_t>(b * c));
        softmax_xent_backward_cpu(b, c, logits.data(), labels.data(), scale, d_cpu.data(), smoothing);

        Tensor dz = upload(Shape{b, c}, logits);
        Tensor dl = upload_typed(*this, labels);
        Tensor dd = device_zeros(Shape{b, c});
        softmax_xent_backward_cuda(DType::F32, b, c, dz.data<float>(), dl.data<int32_t>(), scale, nullptr, dd.data<float>(),
                                   smoothing, s);
        LS_REQUIRE_PARITY(download(dd), d_cpu, kGradTol);
        // In place: dlogits over the logits.
        softmax_xent_backward_cuda(DType::F32, b, c, dz.data<float>(), dl.data<int32_t>(), scale, nullptr, dz.data<float>(),
                                   smoothing, s);
        LS_REQUIRE_PARITY(download(dz), d_cpu, kGradTol);
      }
}

TEST_CASE_METHOD(GpuFixture, "GPU softmax cross-entropy 16-bit forward matches the CPU on 16-bit-rounded logits",
                 "[xent]") {
  const cudaStream_t s = ctx.raw_stream();
  for (const DType dt : {DType::BF16, DType::F16})
    DYNAMIC_SECTION("dtype " << dtype_name(dt)) {
      for (const Shape2 sh : kShapes)
        for (const float smoothing : {0.f, 0.1f})
          for (const bool ties : {false, true}) {
            const int64_t b = sh.b, c = sh.c;
            INFO("b " << b << " c " << c << " smoothing " << smoothing << " ties " << ties);
            const auto logits16 = bits_16(dt, random_logits(b * c, 5000 + b * 7 + c, ties));
            const auto logits = values_16(dt, logits16);
            const auto labels = random_labels(b, c, 6000 + b + c);
            const XentResult cpu = softmax_xent_forward_cpu(b, c, logits.data(), labels.data(), smoothing);

            Tensor dz = upload_16(*this, dt, logits16);
            Tensor dl = upload_typed(*this, labels);
            Tensor row_loss = device_zeros(Shape{b}, DType::F64), row_correct = device_zeros(Shape{b}, DType::I32);
            // Accumulates into what is there: start from (1.5, 3).
            Tensor loss_sum = upload_typed(*this, std::vector<double>{1.5});
            Tensor correct = upload_typed(*this, std::vector<int64_t>{3});
            softmax_xent_forward_cuda(dt, b, c, dz.raw_data(), dl.data<int32_t>(), smoothing,
                                         row_loss.data<double>(), row_correct.data<int32_t>(),
                                         loss_sum.data<double>(), correct.data<int64_t>(), s);
            CHECK(download_typed<int64_t>(*this, correct)[0] == 3 + cpu.correct);
            require_loss_close(download_typed<double>(*this, loss_sum)[0] - 1.5, cpu.loss_sum, 1e-9);

            // Per-row results against the CPU op on that row alone.
            const auto rows = download_typed<double>(*this, row_loss);
            const auto hits = download_typed<int32_t>(*this, row_correct);
            for (int64_t i = 0; i < std::min<int64_t>(b, 50); ++i) {
              const XentResult one =
                  softmax_xent_forward_cpu(1, c, logits.data() + i * c, labels.data() + i, smoothing);
              INFO("row " << i);
              CHECK(hits[i] == one.correct);
              require_loss_close(rows[i], one.loss_sum, 1e-9);
            }
          }
    }
}

TEST_CASE_METHOD(GpuFixture, "GPU softmax cross-entropy 16-bit backward matches the CPU gradients rounded to 16 bits",
                 "[xent]") {
  const cudaStream_t s = ctx.raw_stream();
  for (const DType dt : {DType::BF16, DType::F16})
    DYNAMIC_SECTION("dtype " << dtype_name(dt)) {
      const double grad_tol = grad_tol_16(dt);
      for (const Shape2 sh : kShapes)
        for (const float smoothing : {0.f, 0.1f})
          for (const float scale : {1.f, 0.25f}) {
            const int64_t b = sh.b, c = sh.c;
            INFO("b " << b << " c " << c << " smoothing " << smoothing << " scale " << scale);
            const auto logits16 = bits_16(dt, random_logits(b * c, 7000 + b * 7 + c, /*ties=*/false));
            const auto logits = values_16(dt, logits16);
            const auto labels = random_labels(b, c, 8000 + b + c);
            std::vector<float> d_cpu(static_cast<size_t>(b * c));
            softmax_xent_backward_cpu(b, c, logits.data(), labels.data(), scale, d_cpu.data(), smoothing);

            Tensor dz = upload_16(*this, dt, logits16);
            Tensor dl = upload_typed(*this, labels);
            Tensor dd = device_zeros(Shape{b * c}, dt);
            softmax_xent_backward_cuda(dt, b, c, dz.raw_data(), dl.data<int32_t>(), scale, nullptr, dd.raw_data(),
                                          smoothing, s);
            const auto d_gpu = values_16(dt, download_16(*this, dd));
            LS_REQUIRE_PARITY(d_gpu, rounded_16(dt, d_cpu), grad_tol);
            const double excess = max_excess_over_16bit_rounding(dt, d_gpu, d_cpu);
            INFO("beyond the " << dtype_name(dt) << " rounding by " << excess << " (tolerance " << kGradTol << ")");
            REQUIRE(excess <= kGradTol);
            // In place: dlogits over the logits, bitwise the same gradients.
            softmax_xent_backward_cuda(dt, b, c, dz.raw_data(), dl.data<int32_t>(), scale, nullptr, dz.raw_data(),
                                          smoothing, s);
            CHECK(download_16(*this, dz) == download_16(*this, dd));
          }
    }
}

// The dynamic loss scale: the trainer seeds backward with scale * *scale_dev.
// B = 8 rows of C = 10 logits in [-2, 2] (so also after rounding to 16 bits),
// scale = 1/8, smoothing eps in {0, 0.01}. Then every softmax probability is
// in [p_min, p_max] with p_min = e^-2 / (e^-2 + 9 e^2) > 2.0e-3 and
// p_max = e^2 / (e^2 + 9 e^-2) < 0.86, so the unscaled gradients satisfy
//   off the label: scale * (p - eps / C) >= (2.0e-3 - 1e-3) / 8 > 1.2e-4 > 2^-14 (fp16's smallest normal),
//   at the label:  scale * |p - 1 + eps - eps / C| >= (1 - 0.86 - 0.01) / 8 > 1.6e-2,
// all at most 1/8 in magnitude: normal in fp32, bf16 and fp16, and 1024 times
// them at most 128, far below fp16's 65504. So the scaling by 2^10 is exact
// for every type (see the file comment), and the test asserts the bounds too.
TEST_CASE_METHOD(GpuFixture, "GPU softmax cross-entropy backward: a device loss scale of 1024 scales gradients exactly",
                 "[xent]") {
  const cudaStream_t s = ctx.raw_stream();
  const int64_t b = 8, c = 10;
  const float scale = 0.125f;
  const auto logits = random_vector(b * c, 9000, -2.f, 2.f);
  const auto labels = random_labels(b, c, 9001);
  Tensor dl = upload_typed(*this, labels);
  Tensor s1024 = upload(Shape{1}, {1024.f}), s1 = upload(Shape{1}, {1.f});
  const float* scale_dev = s1024.data<float>();
  const float* one_dev = s1.data<float>();
  LS_CUDA_CHECK(cudaDeviceSynchronize());  // the uploads are done before the context's stream reads them
  for (const float smoothing : {0.f, 0.01f}) {
    INFO("smoothing " << smoothing);
    {
      INFO("F32");
      std::vector<float> d_cpu(static_cast<size_t>(b * c));
      softmax_xent_backward_cpu(b, c, logits.data(), labels.data(), scale, d_cpu.data(), smoothing);
      Tensor dz = upload(Shape{b, c}, logits);
      Tensor d0 = device_zeros(Shape{b, c}), d1 = device_zeros(Shape{b, c}), dk = device_zeros(Shape{b, c});
      LS_CUDA_CHECK(cudaDeviceSynchronize());
      softmax_xent_backward_cuda(DType::F32, b, c, dz.data<float>(), dl.data<int32_t>(), scale, nullptr, d0.data<float>(),
                                 smoothing, s);
      softmax_xent_backward_cuda(DType::F32, b, c, dz.data<float>(), dl.data<int32_t>(), scale, one_dev, d1.data<float>(),
                                 smoothing, s);
      softmax_xent_backward_cuda(DType::F32, b, c, dz.data<float>(), dl.data<int32_t>(), scale, scale_dev, dk.data<float>(),
                                 smoothing, s);
      const auto g0 = download(d0), g1 = download(d1), gk = download(dk);
      LS_REQUIRE_PARITY(g0, d_cpu, kGradTol);  // null scale_dev: the CPU op's gradients, as above
      CHECK(g1 == g0);                         // *scale_dev = 1: bitwise the null result
      for (size_t i = 0; i < g0.size(); ++i) {
        INFO("element " << i << ": " << g0[i] << " scaled " << gk[i]);
        REQUIRE(std::abs(g0[i]) >= 1e-4f);  // the bounds above: normal, nonzero
        REQUIRE(gk[i] == 1024.f * g0[i]);
      }
    }
    for (const DType dt : {DType::BF16, DType::F16}) {
      INFO(dtype_name(dt));
      const auto logits16 = bits_16(dt, logits);
      Tensor dz = upload_16(*this, dt, logits16);
      Tensor d0 = device_zeros(Shape{b * c}, dt), d1 = device_zeros(Shape{b * c}, dt);
      Tensor dk = device_zeros(Shape{b * c}, dt);
      LS_CUDA_CHECK(cudaDeviceSynchronize());
      softmax_xent_backward_cuda(dt, b, c, dz.raw_data(), dl.data<int32_t>(), scale, nullptr, d0.raw_data(),
                                    smoothing, s);
      softmax_xent_backward_cuda(dt, b, c, dz.raw_data(), dl.data<int32_t>(), scale, one_dev, d1.raw_data(),
                                    smoothing, s);
      softmax_xent_backward_cuda(dt, b, c, dz.raw_data(), dl.data<int32_t>(), scale, scale_dev, dk.raw_data(),
                                    smoothing, s);
      const auto b0 = download_16(*this, d0);
      CHECK(download_16(*this, d1) == b0);  // *scale_dev = 1: bitwise the null result
      const auto g0 = values_16(dt, b0), gk = values_16(dt, download_16(*this, dk));
      // The null result against the CPU op on the same rounded logits (the tolerances of the 16-bit test above).
      const auto logits_r = values_16(dt, logits16);
      std::vector<float> d_cpu(static_cast<size_t>(b * c));
      softmax_xent_backward_cpu(b, c, logits_r.data(), labels.data(), scale, d_cpu.data(), smoothing);
      LS_REQUIRE_PARITY(g0, rounded_16(dt, d_cpu), grad_tol_16(dt));
      for (size_t i = 0; i < g0.size(); ++i) {
        INFO("element " << i << ": " << g0[i] << " scaled " << gk[i]);
        REQUIRE(std::abs(g0[i]) >= 0x1p-14f);  // normal in dt (fp16's smallest normal; bf16's is far smaller)
        REQUIRE(std::abs(gk[i]) < 65504.f);    // finite in fp16
        REQUIRE(gk[i] == 1024.f * g0[i]);
      }
    }
  }
}

TEST_CASE_METHOD(GpuFixture, "GPU softmax cross-entropy: bad labels give NaN, not a crash; empty batches", "[xent]") {
  const cudaStream_t s = ctx.raw_stream();
  const int64_t b = 3, c = 5;
  const auto logits = random_vector(b * c, 5);
  const std::vector<int32_t> labels{1, 5, -1};  // rows 1 and 2 outside [0, 5)
  Tensor dz = upload(Shape{b, c}, logits), dl = upload_typed(*this, labels);
  Tensor row_loss = device_zeros(Shape{b}, DType::F64), row_correct = device_zeros(Shape{b}, DType::I32);
  Tensor loss_sum = device_zeros(Shape{1}, DType::F64), correct = device_zeros(Shape{1}, DType::I64);
  softmax_xent_forward_cuda(DType::F32, b, c, dz.data<float>(), dl.data<int32_t>(), 0.f, row_loss.data<double>(),
                            row_correct.data<int32_t>(), loss_sum.data<double>(), correct.data<int64_t>(), s);
  const auto rows = download_typed<double>(*this, row_loss);
  CHECK(std::isfinite(rows[0]));
  CHECK(std::isnan(rows[1]));
  CHECK(std::isnan(rows[2]));
  CHECK(download_typed<int32_t>(*this, row_correct)[1] == 0);
  CHECK(std::isnan(download_typed<double>(*this, loss_sum)[0]));

  Tensor dd = device_zeros(Shape{b, c});
  softmax_xent_backward_cuda(DType::F32, b, c, dz.data<float>(), dl.data<int32_t>(), 1.f, nullptr, dd.data<float>(), 0.1f, s);
  const auto d = download(dd);
  for (int64_t j = 0; j < c; ++j) {
    CHECK(std::isfinite(d[j]));
    CHECK(std::isnan(d[c + j]));
    CHECK(std::isnan(d[2 * c + j]));
  }

  // b = 0: nothing runs, the accumulators keep their values.
  Tensor keep_sum = upload_typed(*this, std::vector<double>{2.5});
  Tensor keep_correct = upload_typed(*this, std::vector<int64_t>{4});
  softmax_xent_forward_cuda(DType::F32, 0, c, nullptr, nullptr, 0.f, nullptr, nullptr, keep_sum.data<double>(),
                            keep_correct.data<int64_t>(), s);
  softmax_xent_backward_cuda(DType::F32, 0, c, nullptr, nullptr, 1.f, nullptr, nullptr, 0.f, s);
  CHECK(download_typed<double>(*this, keep_sum)[0] == 2.5);
  CHECK(download_typed<int64_t>(*this, keep_correct)[0] == 4);

  // Smoothing outside [0, 1) is refused on the host, as by the CPU op.
  CHECK_THROWS_AS(
      softmax_xent_backward_cuda(DType::F32, b, c, dz.data<float>(), dl.data<int32_t>(), 1.f, nullptr, dd.data<float>(), 1.f, s),
      Error);
  LS_CUDA_CHECK(cudaGetLastError());
}

TEST_CASE_METHOD(GpuFixture, "GPU softmax cross-entropy 16-bit: bad labels give NaN, not a crash; empty batches",
                 "[xent]") {
  const cudaStream_t s = ctx.raw_stream();
  const int64_t b = 3, c = 5;
  const std::vector<int32_t> labels{1, 5, -1};  // rows 1 and 2 outside [0, 5)
  for (const DType dt : {DType::BF16, DType::F16})
    DYNAMIC_SECTION("dtype " << dtype_name(dt)) {
      const auto logits16 = bits_16(dt, random_vector(b * c, 5));
      Tensor dz = upload_16(*this, dt, logits16), dl = upload_typed(*this, labels);
      Tensor row_loss = device_zeros(Shape{b}, DType::F64), row_correct = device_zeros(Shape{b}, DType::I32);
      Tensor loss_sum = device_zeros(Shape{1}, DType::F64), correct = device_zeros(Shape{1}, DType::I64);
      softmax_xent_forward_cuda(dt, b, c, dz.raw_data(), dl.data<int32_t>(), 0.f, row_loss.data<double>(),
                                   row_correct.data<int32_t>(), loss_sum.data<double>(), correct.data<int64_t>(), s);
      const auto rows = download_typed<double>(*this, row_loss);
      CHECK(std::isfinite(rows[0]));
      CHECK(std::isnan(rows[1]));
      CHECK(std::isnan(rows[2]));
      CHECK(download_typed<int32_t>(*this, row_correct)[1] == 0);
      CHECK(std::isnan(download_typed<double>(*this, loss_sum)[0]));

      Tensor dd = device_zeros(Shape{b * c}, dt);
      softmax_xent_backward_cuda(dt, b, c, dz.raw_data(), dl.data<int32_t>(), 1.f, nullptr, dd.raw_data(), 0.1f,
                                    s);
      const auto d = values_16(dt, download_16(*this, dd));
      for (int64_t j = 0; j < c; ++j) {
        CHECK(std::isfinite(d[j]));
        CHECK(std::isnan(d[c + j]));
        CHECK(std::isnan(d[2 * c + j]));
      }

      // b = 0: nothing runs, the accumulators keep their values.
      Tensor keep_sum = upload_typed(*this, std::vector<double>{2.5});
      Tensor keep_correct = upload_typed(*this, std::vector<int64_t>{4});
      softmax_xent_forward_cuda(dt, 0, c, nullptr, nullptr, 0.f, nullptr, nullptr, keep_sum.data<double>(),
                                   keep_correct.data<int64_t>(), s);
      softmax_xent_backward_cuda(dt, 0, c, nullptr, nullptr, 1.f, nullptr, nullptr, 0.f, s);
      CHECK(download_typed<double>(*this, keep_sum)[0] == 2.5);
      CHECK(download_typed<int64_t>(*this, keep_correct)[0] == 4);

      // Smoothing outside [0, 1) is refused on the host, as by the CPU op.
      CHECK_THROWS_AS(softmax_xent_forward_cuda(dt, b, c, dz.raw_data(), dl.data<int32_t>(), 1.f,
                                                   row_loss.data<double>(), row_correct.data<int32_t>(),
                                                   loss_sum.data<double>(), correct.data<int64_t>(), s),
                      Error);
      CHECK_THROWS_AS(softmax_xent_backward_cuda(dt, b, c, dz.raw_data(), dl.data<int32_t>(), 1.f, nullptr,
                                                    dd.raw_data(), 1.f, s),
                      Error);
      LS_CUDA_CHECK(cudaGetLastError());
    }
  // A dtype other than F32, BF16 or F16 is refused on the host, even for an empty batch.
  CHECK_THROWS_AS(softmax_xent_forward_cuda(DType::F64, 0, c, nullptr, nullptr, 0.f, nullptr, nullptr, nullptr,
                                               nullptr, s),
                  Error);
  CHECK_THROWS_AS(softmax_xent_backward_cuda(DType::F64, 0, c, nullptr, nullptr, 1.f, nullptr, nullptr, 0.f, s),
                  Error);
}
