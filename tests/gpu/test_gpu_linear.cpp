// Linear on the GPU (cuBLAS) against the CPU op: forward and backward, fp32,
// bf16 and fp16, with and without bias, fused ReLU, gradient accumulation and dx.
//
// Tolerances (max |gpu - cpu| / max(1, |cpu|), see LS_REQUIRE_PARITY):
//   fp32 forward 5e-5: each output is a dot product of `in` (<= 300) products of
//     values in [-1, 1], summed in fp32 in different orders (cuBLAS also splits
//     and fuses multiply-adds). On these inputs the CPU op is up to 8e-6 from
//     the exact (double) result, so GPU and CPU can differ by about twice that.
//     TF32 (10-bit mantissa inputs) would be off by ~5e-4: ten times the tolerance.
//   fp32 backward 1e-4: dw and db reduce over the batch (<= 128 rows), dx over
//     `out`; the CPU is within 5e-6 of exact here.
//   The masked dy must match exactly (same y, same mask).
//   bf16: the CPU reference gets the same bf16-rounded inputs. y and dx are
//     rounded to bf16 once (relative error <= 2^-8 ~ 0.004: 8 significant bits, round to nearest): tolerance 1e-2.
//     dw (fp32, tensor cores, fp32 accumulation of exact bf16 products) and db
//     (fp32) differ from the CPU only in summation order: tolerance 1e-3.
//   fp16: the same with 11 significant bits: y and dx within 2^-11 ~ 5e-4 of
//     the fp32 value, plus one ulp (2^-10) where a summation-order difference
//     flips the rounding: tolerance 2e-3; dw and db as for bf16. Values here
//     stay far below fp16's 65504 (|y| <= in <= 300 at the very worst).
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "cuda/check.h"
#include "gpu_test_util.h"
#include "ops/linear/linear_cpu.h"
#include "ops/linear/linear_cuda.h"

using namespace lockstep;
using namespace lockstep::testing;

namespace {

constexpr double kForwardTol = 5e-5;
constexpr double kBackwardTol = 1e-4;
constexpr double kBf16OutTol = 1e-2;
constexpr double k16BitGradTol = 1e-3;
constexpr double kF16OutTol = 2e-3;

// The tensor helpers copy on the legacy default stream; the ops run on the
// context's non-blocking stream. Wait for everything before launching.
void settle() { LS_CUDA_CHECK(cudaDeviceSynchronize()); }

struct LinearShape {
  int64_t B, in, out;
};
const LinearShape kShapes[] = {{1, 7, 5}, {3, 33, 17}, {64, 300, 10}, {128, 257, 129}};

}  // namespace

TEST_CASE_METHOD(GpuFixture, "linear fp32 forward and backward match the CPU", "[linear]") {
  uint64_t seed = 100;
  for (const LinearShape& sh : kShapes)
    for (int relu = 0; relu < 2; ++relu)
      for (int bias = 0; bias < 2; ++bias)
        for (int accumulate = 0; accumulate < 2; ++accumulate)
          for (int with_dx = 0; with_dx < 2; ++with_dx) {
            if (!with_dx && (relu || !bias)) continue;  // dx null: one combination per shape
            const auto [B, in, out] = sh;
            CAPTURE(B, in, out, relu, bias, accumulate, with_dx);
            const auto x = random_vector(B * in, ++seed), w = random_vector(out * in, ++seed),
                       b = random_vector(out, ++seed), dy0 = random_vector(B * out, ++seed),
                       dw0 = random_vector(out * in, ++seed), db0 = random_vector(out, ++seed),
                       dx0 = random_vector(B * in, ++seed);

            // CPU reference.
            std::vector<float> y_cpu(static_cast<size_t>(B * out));
            ops::linear_forward_cpu(B, in, out, x.data(), w.data(), bias ? b.data() : nullptr, y_cpu.data(), relu);
            auto dy_cpu = dy0, dw_cpu = dw0, db_cpu = db0, dx_cpu = dx0;
            ops::linear_backward_cpu(B, in, out, x.data(), w.data(), y_cpu.data(), dy_cpu.data(),
                                     with_dx ? dx_cpu.data() : nullptr, dw_cpu.data(), bias ? db_cpu.data() : nullptr,
                                     accumulate, relu);

            // GPU. Backward reads the CPU's y, so both apply the same ReLU mask.
            Tensor dx_ = upload(Shape{B, in}, dx0), dw_ = upload(Shape{out, in}, dw0), db_ = upload(Shape{out}, db0);
            Tensor x_ = upload(Shape{B, in}, x), w_ = upload(Shape{out, in}, w), b_ = upload(Shape{out}, b);
            Tensor y_ = device_zeros(Shape{B, out}), yref_ = upload(Shape{B, out}, y_cpu),
                   dy_ = upload(Shape{B, out}, dy0);
            settle();
            ops::linear_forward_cuda(DType::F32, ctx, B, in, out, x_.data<float>(), w_.data<float>(),
                                     bias ? b_.data<float>() : nullptr, y_.data<float>(), relu);
            ops::linear_backward_cuda(DType::F32, ctx, B, in, out, x_.data<float>(), w_.data<float>(), yref_.data<float>(),
                                      dy_.data<float>(), with_dx ? dx_.data<float>() : nullptr, dw_.data<float>(),
                                      bias ? db_.data<float>() : nullptr, accumulate, relu);
            LS_REQUIRE_PARITY(download(y_), y_cpu, kForwardTol);
            LS_REQUIRE_PARITY(download(dy_), dy_cpu, 0.0);
            LS_REQUIRE_PARITY(download(dw_), dw_cpu, kBackwardTol);
            LS_REQUIRE_PARITY(download(db_), db_cpu, kBackwardTol);  // untouched when bias is null
            LS_REQUIRE_PARITY(download(dx_), dx_cpu, kBackwardTol);  // untouched when dx is null
          }
}

TEST_CASE_METHOD(GpuFixture, "linear fp32 backward with an empty batch zeroes or keeps the gradients", "[linear]") {
  const int64_t in = 5, out = 3;
  const auto w = random_vector(out * in, 1), dw0 = random_vector(out * in, 2), db0 = random_vector(out, 3);
  for (int accumulate = 0; accumulate < 2; ++accumulate) {
    Tensor w_ = upload(Shape{out, in}, w), dw_ = upload(Shape{out, in}, dw0), db_ = upload(Shape{out}, db0);
    settle();
    ops::linear_backward_cuda(DType::F32, ctx, 0, in, out, nullptr, w_.data<float>(), nullptr, nullptr, nullptr,
                              dw_.data<float>(), db_.data<float>(), accumulate, false);
    CHECK(download(dw_) == (accumulate ? dw0 : std::vector<float>(dw0.size(), 0.f)));
    CHECK(download(db_) == (accumulate ? db0 : std::vector<float>(db0.size(), 0.f)));
  }
}

TEST_CASE_METHOD(GpuFixture, "linear 16-bit forward and backward match the CPU on 16-bit-rounded inputs",
                 "[linear]") {
  for (const DType dt : {DType::BF16, DType::F16}) {
    INFO("dtype " << dtype_name(dt));
    const double out_tol = dt == DType::BF16 ? kBf16OutTol : kF16OutTol;
    uint64_t seed = 900;
    for (const LinearShape& sh : kShapes)
      for (int relu = 0; relu < 2; ++relu)
        for (int bias = 0; bias < 2; ++bias)
          for (int accumulate = 0; accumulate < 2; ++accumulate) {
            const bool with_dx = !(relu && bias && accumulate);  // one combination without dx
            const auto [B, in, out] = sh;
            CAPTURE(B, in, out, relu, bias, accumulate, with_dx);
            const auto x16 = bits_16(dt, random_vector(B * in, ++seed));
            const auto w16 = bits_16(dt, random_vector(out * in, ++seed));
            const auto dy16 = bits_16(dt, random_vector(B * out, ++seed));
            const auto b = random_vector(out, ++seed), dw0 = random_vector(out * in, ++seed),
                       db0 = random_vector(out, ++seed);
            const auto x = values_16(dt, x16), w = values_16(dt, w16), dy0 = values_16(dt, dy16);

            // Forward: CPU in fp32 on the rounded inputs; GPU rounds y to the 16-bit type once.
            std::vector<float> y_cpu(static_cast<size_t>(B * out));
            ops::linear_forward_cpu(B, in, out, x.data(), w.data(), bias ? b.data() : nullptr, y_cpu.data(), relu);
            Tensor x_ = upload_16(*this, dt, x16), w_ = upload_16(*this, dt, w16), b_ = upload(Shape{out}, b);
            Tensor y_ = device_zeros(Shape{B * out}, dt);
            settle();
            ops::linear_forward_cuda(dt, ctx, B, in, out, x_.raw_data(), w_.raw_data(),
                                        bias ? b_.data<float>() : nullptr, y_.raw_data(), relu);
            LS_REQUIRE_PARITY(values_16(dt, download_16(*this, y_)), y_cpu, out_tol);

            // Backward: both sides see the same 16-bit y (the CPU's, rounded) and dy.
            const auto yref16 = bits_16(dt, y_cpu);
            const auto yref = values_16(dt, yref16);
            auto dy_cpu = dy0, dw_cpu = dw0, db_cpu = db0;
            std::vector<float> dx_cpu(static_cast<size_t>(B * in), 0.f);
            ops::linear_backward_cpu(B, in, out, x.data(), w.data(), yref.data(), dy_cpu.data(),
                                     with_dx ? dx_cpu.data() : nullptr, dw_cpu.data(), bias ? db_cpu.data() : nullptr,
                                     accumulate, relu);
            Tensor yref_ = upload_16(*this, dt, yref16), dy_ = upload_16(*this, dt, dy16);
            Tensor dx_ = device_zeros(Shape{B * in}, dt);
            Tensor dw_ = upload(Shape{out, in}, dw0), db_ = upload(Shape{out}, db0);
            settle();
            ops::linear_backward_cuda(dt, ctx, B, in, out, x_.raw_data(), w_.raw_data(), yref_.raw_data(),
                                         dy_.raw_data(), with_dx ? dx_.raw_data() : nullptr, dw_.data<float>(),
                                         bias ? db_.data<float>() : nullptr, accumulate, relu);
            // The mask only zeroes 16-bit values: exact.
            LS_REQUIRE_PARITY(values_16(dt, download_16(*this, dy_)), dy_cpu, 0.0);
            LS_REQUIRE_PARITY(download(dw_), dw_cpu, k16BitGradTol);
            LS_REQUIRE_PARITY(download(db_), db_cpu, k16BitGradTol);
            LS_REQUIRE_PARITY(values_16(dt, download_16(*this, dx_)), dx_cpu, out_tol);
          }
  }
}
