// GPU softmax cross-entropy (ops/softmax_xent_cuda.h) against the CPU op:
// loss sums, correct counts (argmax ties included) and gradients, with label
// smoothing 0 and 0.1, from one class to very wide rows and from one row to
// more rows than the row grid (65535 blocks); fp32 logits, and bf16 logits
// (bf16-rounded values uploaded as bf16, the CPU op run in fp32 on the same
// values) with bf16 gradients.
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
//  - bf16 logits: correct counts exact and loss sums 1e-9, as above (each
//    logit is widened exactly, then the fp32 path's math).
//  - bf16 gradients (the fp32 path's values, rounded to bf16 once) against the
//    CPU's fp32 gradients rounded to bf16: 2^-7. The fp32 values can differ
//    (1e-6 above), and where that straddles a bf16 rounding boundary the two
//    roundings are one bf16 ulp apart: at most 2^-7 of the value (8
//    significant bits); below 1 in magnitude the comparison is absolute, and
//    2^-7 is then >= 2 ulps. As that is loose for small gradients, also
//    against the CPU's unrounded fp32 gradients: within 1e-6 (the fp32
//    tolerance) plus 2^-8 |gpu|, the bound on the one rounding to bf16.
//  - in place (dlogits over the logits): bitwise the out-of-place result.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "cuda/check.h"
#include "gpu_test_util.h"
#include "ops/softmax_xent.h"
#include "ops/softmax_xent_cuda.h"

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
constexpr double kBf16GradTol = 1.0 / 128;  // 2^-7: one bf16 ulp (see above)

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
          softmax_xent_forward_cuda(b, c, dz.data<float>(), dl.data<int32_t>(), smoothing, row_loss.data<double>(),
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
        softmax_xent_forward_cuda(b, c, dz.data<float>(), dl.data<int32_t>(), smoothing, row_loss.data<double>(),
                                  row_correct.data<int32_t>(), again.data<double>(), again_correct.data<int64_t>(), s);
        const double once = download_typed<double>(*this, again)[0];
        softmax_xent_forward_cuda(b, c, dz.data<float>(), dl.data<int32_t>(), smoothing, row_loss.data<double>(),
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
        softmax_xent_backward_cuda(b, c, dz.data<float>(), dl.data<int32_t>(), scale, dd.data<float>(), smoothing, s);
        LS_REQUIRE_PARITY(download(dd), d_cpu, kGradTol);
        // In place: dlogits over the logits.
        softmax_xent_backward_cuda(b, c, dz.data<float>(), dl.data<int32_t>(), scale, dz.data<float>(), smoothing, s);
        LS_REQUIRE_PARITY(download(dz), d_cpu, kGradTol);
      }
}

TEST_CASE_METHOD(GpuFixture, "GPU softmax cross-entropy bf16 forward matches the CPU on bf16-rounded logits",
                 "[xent]") {
  const cudaStream_t s = ctx.raw_stream();
  for (const Shape2 sh : kShapes)
    for (const float smoothing : {0.f, 0.1f})
      for (const bool ties : {false, true}) {
        const int64_t b = sh.b, c = sh.c;
        INFO("b " << b << " c " << c << " smoothing " << smoothing << " ties " << ties);
        const auto logits16 = bf16_bits(random_logits(b * c, 5000 + b * 7 + c, ties));
        const auto logits = bf16_values(logits16);
        const auto labels = random_labels(b, c, 6000 + b + c);
        const XentResult cpu = softmax_xent_forward_cpu(b, c, logits.data(), labels.data(), smoothing);

        Tensor dz = upload_bf16(*this, logits16);
        Tensor dl = upload_typed(*this, labels);
        Tensor row_loss = device_zeros(Shape{b}, DType::F64), row_correct = device_zeros(Shape{b}, DType::I32);
        // Accumulates into what is there: start from (1.5, 3).
        Tensor loss_sum = upload_typed(*this, std::vector<double>{1.5});
        Tensor correct = upload_typed(*this, std::vector<int64_t>{3});
        softmax_xent_forward_bf16_cuda(b, c, dz.raw_data(), dl.data<int32_t>(), smoothing, row_loss.data<double>(),
                                       row_correct.data<int32_t>(), loss_sum.data<double>(), correct.data<int64_t>(),
                                       s);
        CHECK(download_typed<int64_t>(*this, correct)[0] == 3 + cpu.correct);
        require_loss_close(download_typed<double>(*this, loss_sum)[0] - 1.5, cpu.loss_sum, 1e-9);

        // Per-row results against the CPU op on that row alone.
        const auto rows = download_typed<double>(*this, row_loss);
        const auto hits = download_typed<int32_t>(*this, row_correct);
        for (int64_t i = 0; i < std::min<int64_t>(b, 50); ++i) {
          const XentResult one = softmax_xent_forward_cpu(1, c, logits.data() + i * c, labels.data() + i, smoothing);
          INFO("row " << i);
          CHECK(hits[i] == one.correct);
          require_loss_close(rows[i], one.loss_sum, 1e-9);
        }
      }
}

TEST_CASE_METHOD(GpuFixture, "GPU softmax cross-entropy bf16 backward matches the CPU gradients rounded to bf16",
                 "[xent]") {
  const cudaStream_t s = ctx.raw_stream();
  for (const Shape2 sh : kShapes)
    for (const float smoothing : {0.f, 0.1f})
      for (const float scale : {1.f, 0.25f}) {
        const int64_t b = sh.b, c = sh.c;
        INFO("b " << b << " c " << c << " smoothing " << smoothing << " scale " << scale);
        const auto logits16 = bf16_bits(random_logits(b * c, 7000 + b * 7 + c, /*ties=*/false));
        const auto logits = bf16_values(logits16);
        const auto labels = random_labels(b, c, 8000 + b + c);
        std::vector<float> d_cpu(static_cast<size_t>(b * c));
        softmax_xent_backward_cpu(b, c, logits.data(), labels.data(), scale, d_cpu.data(), smoothing);

        Tensor dz = upload_bf16(*this, logits16);
        Tensor dl = upload_typed(*this, labels);
        Tensor dd = device_zeros(Shape{b * c}, DType::BF16);
        softmax_xent_backward_bf16_cuda(b, c, dz.raw_data(), dl.data<int32_t>(), scale, dd.raw_data(), smoothing, s);
        const auto d_gpu = bf16_values(download_bf16(*this, dd));
        LS_REQUIRE_PARITY(d_gpu, bf16_rounded(d_cpu), kBf16GradTol);
        const double excess = max_excess_over_bf16_rounding(d_gpu, d_cpu);
        INFO("beyond the bf16 rounding by " << excess << " (tolerance " << kGradTol << ")");
        REQUIRE(excess <= kGradTol);
        // In place: dlogits over the logits, bitwise the same gradients.
        softmax_xent_backward_bf16_cuda(b, c, dz.raw_data(), dl.data<int32_t>(), scale, dz.raw_data(), smoothing, s);
        CHECK(download_bf16(*this, dz) == download_bf16(*this, dd));
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
  softmax_xent_forward_cuda(b, c, dz.data<float>(), dl.data<int32_t>(), 0.f, row_loss.data<double>(),
                            row_correct.data<int32_t>(), loss_sum.data<double>(), correct.data<int64_t>(), s);
  const auto rows = download_typed<double>(*this, row_loss);
  CHECK(std::isfinite(rows[0]));
  CHECK(std::isnan(rows[1]));
  CHECK(std::isnan(rows[2]));
  CHECK(download_typed<int32_t>(*this, row_correct)[1] == 0);
  CHECK(std::isnan(download_typed<double>(*this, loss_sum)[0]));

  Tensor dd = device_zeros(Shape{b, c});
  softmax_xent_backward_cuda(b, c, dz.data<float>(), dl.data<int32_t>(), 1.f, dd.data<float>(), 0.1f, s);
  const auto d = download(dd);
  for (int64_t j = 0; j < c; ++j) {
    CHECK(std::isfinite(d[j]));
    CHECK(std::isnan(d[c + j]));
    CHECK(std::isnan(d[2 * c + j]));
  }

  // b = 0: nothing runs, the accumulators keep their values.
  Tensor keep_sum = upload_typed(*this, std::vector<double>{2.5});
  Tensor keep_correct = upload_typed(*this, std::vector<int64_t>{4});
  softmax_xent_forward_cuda(0, c, nullptr, nullptr, 0.f, nullptr, nullptr, keep_sum.data<double>(),
                            keep_correct.data<int64_t>(), s);
  softmax_xent_backward_cuda(0, c, nullptr, nullptr, 1.f, nullptr, 0.f, s);
  CHECK(download_typed<double>(*this, keep_sum)[0] == 2.5);
  CHECK(download_typed<int64_t>(*this, keep_correct)[0] == 4);

  // Smoothing outside [0, 1) is refused on the host, as by the CPU op.
  CHECK_THROWS_AS(softmax_xent_backward_cuda(b, c, dz.data<float>(), dl.data<int32_t>(), 1.f, dd.data<float>(), 1.f, s),
                  Error);
  LS_CUDA_CHECK(cudaGetLastError());
}

TEST_CASE_METHOD(GpuFixture, "GPU softmax cross-entropy bf16: bad labels give NaN, not a crash; empty batches",
                 "[xent]") {
  const cudaStream_t s = ctx.raw_stream();
  const int64_t b = 3, c = 5;
  const auto logits16 = bf16_bits(random_vector(b * c, 5));
  const std::vector<int32_t> labels{1, 5, -1};  // rows 1 and 2 outside [0, 5)
  Tensor dz = upload_bf16(*this, logits16), dl = upload_typed(*this, labels);
  Tensor row_loss = device_zeros(Shape{b}, DType::F64), row_correct = device_zeros(Shape{b}, DType::I32);
  Tensor loss_sum = device_zeros(Shape{1}, DType::F64), correct = device_zeros(Shape{1}, DType::I64);
  softmax_xent_forward_bf16_cuda(b, c, dz.raw_data(), dl.data<int32_t>(), 0.f, row_loss.data<double>(),
                                 row_correct.data<int32_t>(), loss_sum.data<double>(), correct.data<int64_t>(), s);
  const auto rows = download_typed<double>(*this, row_loss);
  CHECK(std::isfinite(rows[0]));
  CHECK(std::isnan(rows[1]));
  CHECK(std::isnan(rows[2]));
  CHECK(download_typed<int32_t>(*this, row_correct)[1] == 0);
  CHECK(std::isnan(download_typed<double>(*this, loss_sum)[0]));

  Tensor dd = device_zeros(Shape{b * c}, DType::BF16);
  softmax_xent_backward_bf16_cuda(b, c, dz.raw_data(), dl.data<int32_t>(), 1.f, dd.raw_data(), 0.1f, s);
  const auto d = bf16_values(download_bf16(*this, dd));
  for (int64_t j = 0; j < c; ++j) {
    CHECK(std::isfinite(d[j]));
    CHECK(std::isnan(d[c + j]));
    CHECK(std::isnan(d[2 * c + j]));
  }

  // b = 0: nothing runs, the accumulators keep their values.
  Tensor keep_sum = upload_typed(*this, std::vector<double>{2.5});
  Tensor keep_correct = upload_typed(*this, std::vector<int64_t>{4});
  softmax_xent_forward_bf16_cuda(0, c, nullptr, nullptr, 0.f, nullptr, nullptr, keep_sum.data<double>(),
                                 keep_correct.data<int64_t>(), s);
  softmax_xent_backward_bf16_cuda(0, c, nullptr, nullptr, 1.f, nullptr, 0.f, s);
  CHECK(download_typed<double>(*this, keep_sum)[0] == 2.5);
  CHECK(download_typed<int64_t>(*this, keep_correct)[0] == 4);

  // Smoothing outside [0, 1) is refused on the host, as by the CPU op.
  CHECK_THROWS_AS(softmax_xent_forward_bf16_cuda(b, c, dz.raw_data(), dl.data<int32_t>(), 1.f, row_loss.data<double>(),
                                                 row_correct.data<int32_t>(), loss_sum.data<double>(),
                                                 correct.data<int64_t>(), s),
                  Error);
  CHECK_THROWS_AS(softmax_xent_backward_bf16_cuda(b, c, dz.raw_data(), dl.data<int32_t>(), 1.f, dd.raw_data(), 1.f, s),
                  Error);
  LS_CUDA_CHECK(cudaGetLastError());
}
