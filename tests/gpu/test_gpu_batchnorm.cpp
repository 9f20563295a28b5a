// Batch normalisation on the GPU: every device op against its CPU op (fp32,
// and the 16-bit variants on bf16 and on fp16 activations), the per-channel
// math kernels against nn/batchnorm.cpp's formulas, and the whole device
// pipeline (forward, running statistics, backward, evaluation) against the CPU
// BatchNorm2d layer.
//
// Tolerances (max |gpu - cpu| / max(1, |cpu|)):
//   sums of x and squared deviations 1e-5: the CPU adds in fp32 within a plane
//     (up to 12544 values) and in double across planes; the GPU adds
//     everything in double. The difference is the CPU's fp32 rounding of
//     plane sums: ~1e-7 relative to sums of magnitude >> 1 (x has a
//     per-channel offset).
//   backward sums (of zero-mean terms, whose total can be near 0, where the
//     CPU's fp32 plane sums are off by up to ~5e-4 absolute for 100k terms):
//     both sides against an fp64 sum of the same terms; the GPU within 1e-9,
//     the CPU within 1e-4 of the sum of the terms' magnitudes.
//   apply passes 1e-5: one multiply-add per element (the GPU and the CPU's
//     AVX2 clone may fuse it or not: 1 ulp); the residual join adds r to it
//     (batchnorm_apply_add_relu_*: the ulp of the multiply-add carries over).
//   per-channel math kernels 0 (exact): they evaluate the CPU layer's
//     expressions operation by operation in the same precisions with
//     explicitly rounded intrinsics, and the host replica below is compiled
//     without FMA contraction (x86-64 baseline), so equal inputs give equal
//     bits. Where the host compiler may fuse multiply-adds (__FMA__: a
//     LOCKSTEP_NATIVE build) the replica can differ by an ulp: 1e-6 then.
//   layer pipeline: y and running statistics 1e-5 (statistics differ by the
//     sums' rounding, ~1e-7), parameter gradients and dx 1e-4 (backward sums).
//   The masked dy must match exactly (both sides mask with the same y).
//   16-bit variants (dt = BF16 and F16, one section each): x, y, dy, dx are
//     dt-rounded values (uploaded as dt) and the CPU ops run in fp32 on the
//     same values; the per-channel arrays are fp32/fp64 on both sides. Inputs
//     stay in fp16's safe range: |x| <= 4, |dy| <= 1, |y| <= 5, |dx| <= 6,
//     far below 65504; values that land below 2^-14 are fp16 subnormals, which
//     only coarsens them to an absolute step of 2^-24 (inside every absolute
//     tolerance below).
//     - per-channel sums: the fp32 cases' references and tolerances (the GPU
//       widens each 16-bit value exactly and then adds as for fp32 input).
//     - the masked dy: exact (the mask only writes zeros; both sides see the
//       same 16-bit y).
//     - y and dx (computed in fp32, rounded to dt once) against the CPU's
//       fp32 result rounded to dt: one dt ulp, 2^-7 for bf16 (8 significant
//       bits), 2^-10 for fp16 (11): 2^(half_ulp_exponent + 1). The fp32 values
//       can differ by an ulp (fused multiply-adds or not, as for kApplyTol),
//       and where that straddles a dt rounding boundary the two roundings are
//       one dt ulp apart: at most 2^-7 (bf16) / 2^-10 (fp16) of the value;
//       below 1 in magnitude the comparison is absolute, and the bound is then
//       >= 2 ulps (fp16 subnormals: 2^-24 steps, far inside).
//     - y and dx against the CPU's unrounded fp32 result (tighter where values
//       are small): within kApplyTol plus half a dt ulp, 2^-8 |gpu| for bf16,
//       2^-11 |gpu| for fp16 (max_excess_over_16bit_rounding); an fp16
//       subnormal's half ulp, 2^-25 absolute, is inside kApplyTol.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cuda/check.h"
#include "gpu_test_util.h"
#include "nn/batchnorm.h"
#include "nn/parameter_store.h"
#include "ops/batchnorm/batchnorm_cpu.h"
#include "ops/batchnorm/batchnorm_cuda.h"

using namespace lockstep;
using namespace lockstep::testing;

namespace {

constexpr double kSumTol = 1e-5;
constexpr double kBackwardSumTol = 1e-4;     // CPU vs fp64, of the sum of |terms|
constexpr double kBackwardSumGpuTol = 1e-9;  // GPU (fp64 sums) vs fp64, another order
constexpr double kApplyTol = 1e-5;
constexpr double kLayerForwardTol = 1e-5;
constexpr double kLayerBackwardTol = 1e-4;
// One dt ulp relative to the value (see above): 2^-7 for bf16, 2^-10 for fp16.
double out_tol_16(DType dt) { return std::ldexp(1.0, half_ulp_exponent(dt) + 1); }
#ifdef __FMA__
constexpr double kMathTol = 1e-6;
#else
constexpr double kMathTol = 0.0;
#endif

// The tensor helpers copy on the legacy default stream; the ops run on the
// context's non-blocking stream. Wait for everything before launching.
void settle() { LS_CUDA_CHECK(cudaDeviceSynchronize()); }

Tensor upload_f64(GpuFixture& f, const std::vector<double>& v) {
  Tensor t = f.device_zeros(Shape{static_cast<int64_t>(v.size())}, DType::F64);
  f.ctx.synchronize();  // the allocator zero-fills on the context's stream
  LS_CUDA_CHECK(cudaMemcpy(t.raw_data(), v.data(), t.nbytes(), cudaMemcpyHostToDevice));
  settle();
  return t;
}
std::vector<double> download_f64(GpuFixture& f, const Tensor& t) {
  f.ctx.synchronize();
  std::vector<double> v(static_cast<size_t>(t.numel()));
  LS_CUDA_CHECK(cudaMemcpy(v.data(), t.raw_data(), t.nbytes(), cudaMemcpyDeviceToHost));
  return v;
}

double max_rel_diff_f64(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(a[i] - b[i]) / std::max(1.0, std::abs(b[i]));
    if (!(d <= worst)) worst = d;
  }
  return worst;
}
#define REQUIRE_PARITY_F64(gpu, cpu, tol)                                            \
  do {                                                                               \
    const double ls_diff_ = max_rel_diff_f64((gpu), (cpu));                          \
    INFO(#gpu " vs " #cpu ": max rel diff " << ls_diff_ << " (tolerance " << (tol) << ")"); \
    REQUIRE(ls_diff_ <= (tol));                                                      \
  } while (0)

// REQUIREs dt results within `tol` (the fp32 tolerance) plus the rounding of `cpu` to dt.
#define REQUIRE_16BIT_ROUNDING_OF(dt, gpu, cpu, tol)                                 \
  do {                                                                               \
    const double ls_excess_ = max_excess_over_16bit_rounding((dt), (gpu), (cpu));    \
    INFO(#gpu " vs " #cpu ": beyond " << dtype_name(dt) << " rounding by " << ls_excess_ << " (tolerance " \
                                      << (tol) << ")");                              \
    REQUIRE(ls_excess_ <= (tol));                                                    \
  } while (0)

// x [n, c, hw]: uniform [-1, 1] plus a per-channel offset in [-3, 3].
std::vector<float> bn_input(const ops::BatchNormShape& s, uint64_t seed) {
  auto v = random_vector(s.n * s.c * s.hw, seed);
  const auto offset = random_vector(s.c, seed + 7777, -3.f, 3.f);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t p = 0; p < s.hw; ++p)
        v[static_cast<size_t>((n * s.c + c) * s.hw + p)] += offset[static_cast<size_t>(c)];
  return v;
}

// hw == 1 is the channels-last view [N*H*W, C, 1] (--layout nhwc), which the
// reductions handle with their own kernel: C below, at and above one warp's
// 32 channels, and rows enough for several slices; C = 32, 72 and 256 take
// its 16-bytes-per-thread instance (72: a warp's tile of packs part-filled).
const ops::BatchNormShape kShapes[] = {
    {1, 3, 49},  {3, 5, 1},    {4, 16, 196}, {2, 64, 3136}, {3, 7, 143},  {8, 3, 12544},
    {16, 2, 3136}, {21, 37, 1}, {784, 32, 1}, {6272, 256, 1}, {50000, 3, 1}, {300, 72, 1},
};

// The per-channel backward sums (sum dy, sum dy (x - mean)) of the GPU op
// (sdy_gpu, sdyx_gpu: fp64 device tensors) and of the CPU op, each against an
// fp64 sum of the same per-element terms from the masked dy: the GPU adds in
// fp64 (order only), so kBackwardSumGpuTol; the CPU's fp32 plane sums are held
// to kBackwardSumTol of the sum of the terms' magnitudes, since the total of
// zero-mean terms can be near 0.
void check_backward_sums(GpuFixture& f, const ops::BatchNormShape& s, const std::vector<float>& x,
                         const std::vector<float>& mean, const std::vector<float>& dy, const Tensor& sdy_gpu,
                         const Tensor& sdyx_gpu, const std::vector<double>& sdy_cpu,
                         const std::vector<double>& sdyx_cpu) {
  const size_t C = static_cast<size_t>(s.c);
  std::vector<double> sdy_ref(C), sdyx_ref(C), sdy_abs(C), sdyx_abs(C);
  for (int64_t i = 0; i < s.n; ++i)
    for (size_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < s.hw; ++p) {
        const size_t off = static_cast<size_t>((i * s.c + static_cast<int64_t>(c)) * s.hw + p);
        const double g = dy[off], t = g * static_cast<double>(x[off] - mean[c]);
        sdy_ref[c] += g;
        sdyx_ref[c] += t;
        sdy_abs[c] += std::abs(g);
        sdyx_abs[c] += std::abs(t);
      }
  REQUIRE_PARITY_F64(download_f64(f, sdy_gpu), sdy_ref, kBackwardSumGpuTol);
  REQUIRE_PARITY_F64(download_f64(f, sdyx_gpu), sdyx_ref, kBackwardSumGpuTol);
  for (size_t c = 0; c < C; ++c) {
    CAPTURE(c, sdy_cpu[c], sdy_ref[c], sdyx_cpu[c], sdyx_ref[c]);
    REQUIRE(std::abs(sdy_cpu[c] - sdy_ref[c]) <= kBackwardSumTol * std::max(1.0, sdy_abs[c]));
    REQUIRE(std::abs(sdyx_cpu[c] - sdyx_ref[c]) <= kBackwardSumTol * std::max(1.0, sdyx_abs[c]));
  }
}

}  // namespace

TEST_CASE_METHOD(GpuFixture, "batchnorm device ops match the CPU ops", "[batchnorm]") {
  uint64_t seed = 3000;
  for (const ops::BatchNormShape& s : kShapes) {
    CAPTURE(s.n, s.c, s.hw);
    const int64_t n = s.n * s.c * s.hw;
    const auto C = static_cast<size_t>(s.c);
    const auto x = bn_input(s, ++seed);
    Tensor x_ = upload(Shape{n}, x);
    settle();

    // sum
    std::vector<double> sum_cpu(C);
    ops::batchnorm_sum_cpu(s, x.data(), sum_cpu.data());
    Tensor sum_ = device_zeros(Shape{s.c}, DType::F64);
    ops::batchnorm_sum_cuda(DType::F32, ctx, s, x_.data<float>(), sum_.data<double>());
    REQUIRE_PARITY_F64(download_f64(*this, sum_), sum_cpu, kSumTol);

    // centred sum of squares, both from the CPU's mean
    std::vector<float> mean(C);
    for (size_t c = 0; c < C; ++c) mean[c] = static_cast<float>(sum_cpu[c] / static_cast<double>(s.n * s.hw));
    std::vector<double> m2_cpu(C);
    ops::batchnorm_centered_sumsq_cpu(s, x.data(), mean.data(), m2_cpu.data());
    Tensor mean_ = upload(Shape{s.c}, mean), m2_ = device_zeros(Shape{s.c}, DType::F64);
    settle();
    ops::batchnorm_centered_sumsq_cuda(DType::F32, ctx, s, x_.data<float>(), mean_.data<float>(), m2_.data<double>());
    REQUIRE_PARITY_F64(download_f64(*this, m2_), m2_cpu, kSumTol);

    for (int relu = 0; relu < 2; ++relu) {
      CAPTURE(relu);
      // apply
      const auto scale = random_vector(s.c, ++seed), shift = random_vector(s.c, ++seed);
      std::vector<float> y_cpu(static_cast<size_t>(n));
      ops::batchnorm_apply_cpu(s, x.data(), scale.data(), shift.data(), y_cpu.data(), relu);
      Tensor scale_ = upload(Shape{s.c}, scale), shift_ = upload(Shape{s.c}, shift), y_ = device_zeros(Shape{n});
      settle();
      ops::batchnorm_apply_cuda(DType::F32, s, x_.data<float>(), scale_.data<float>(), shift_.data<float>(), y_.data<float>(),
                                relu, ctx.raw_stream());
      LS_REQUIRE_PARITY(download(y_), y_cpu, kApplyTol);

      // backward reduce (both sides mask with the CPU's y)
      const auto dy = random_vector(n, ++seed);
      auto dy_cpu = dy;
      std::vector<double> sdy_cpu(C), sdyx_cpu(C);
      ops::batchnorm_backward_reduce_cpu(s, x.data(), y_cpu.data(), dy_cpu.data(), relu, mean.data(), sdy_cpu.data(),
                                         sdyx_cpu.data());
      Tensor yref_ = upload(Shape{n}, y_cpu), dy_ = upload(Shape{n}, dy);
      Tensor sdy_ = device_zeros(Shape{s.c}, DType::F64), sdyx_ = device_zeros(Shape{s.c}, DType::F64);
      settle();
      ops::batchnorm_backward_reduce_cuda(DType::F32, ctx, s, x_.data<float>(), yref_.data<float>(), dy_.data<float>(), relu,
                                          mean_.data<float>(), sdy_.data<double>(), sdyx_.data<double>());
      LS_REQUIRE_PARITY(download(dy_), dy_cpu, 0.0);
      check_backward_sums(*this, s, x, mean, dy_cpu, sdy_, sdyx_, sdy_cpu, sdyx_cpu);

      // backward apply
      const auto a = random_vector(s.c, ++seed), b = random_vector(s.c, ++seed), d = random_vector(s.c, ++seed);
      std::vector<float> dx_cpu(static_cast<size_t>(n));
      ops::batchnorm_backward_apply_cpu(s, x.data(), dy_cpu.data(), a.data(), b.data(), d.data(), dx_cpu.data());
      Tensor a_ = upload(Shape{s.c}, a), b_ = upload(Shape{s.c}, b), d_ = upload(Shape{s.c}, d);
      Tensor dx_ = upload(Shape{n}, random_vector(n, ++seed));  // garbage: must be overwritten
      settle();
      ops::batchnorm_backward_apply_cuda(DType::F32, s, x_.data<float>(), dy_.data<float>(), a_.data<float>(), b_.data<float>(),
                                         d_.data<float>(), dx_.data<float>(), ctx.raw_stream());
      LS_REQUIRE_PARITY(download(dx_), dx_cpu, kApplyTol);
    }

    // apply with the residual join, y = max(0, x * scale + shift + r): into
    // another buffer, then in place into r
    const auto scale = random_vector(s.c, ++seed), shift = random_vector(s.c, ++seed), r = random_vector(n, ++seed);
    std::vector<float> y_cpu(static_cast<size_t>(n));
    ops::batchnorm_apply_add_relu_cpu(s, x.data(), scale.data(), shift.data(), r.data(), y_cpu.data());
    Tensor scale_ = upload(Shape{s.c}, scale), shift_ = upload(Shape{s.c}, shift), r_ = upload(Shape{n}, r);
    Tensor y_ = upload(Shape{n}, random_vector(n, ++seed));  // garbage: must be overwritten
    settle();
    ops::batchnorm_apply_add_relu_cuda(DType::F32, s, x_.data<float>(), scale_.data<float>(), shift_.data<float>(),
                                       r_.data<float>(), y_.data<float>(), ctx.raw_stream());
    const auto y_gpu = download(y_);
    LS_REQUIRE_PARITY(y_gpu, y_cpu, kApplyTol);
    ops::batchnorm_apply_add_relu_cuda(DType::F32, s, x_.data<float>(), scale_.data<float>(), shift_.data<float>(),
                                       r_.data<float>(), r_.data<float>(), ctx.raw_stream());
    LS_REQUIRE_PARITY(download(r_), y_gpu, 0.0);  // in place: the same values
  }
}

TEST_CASE_METHOD(GpuFixture, "batchnorm 16-bit device ops match the CPU ops on 16-bit-rounded values", "[batchnorm]") {
  for (const DType dt : {DType::BF16, DType::F16})
    DYNAMIC_SECTION("dtype " << dtype_name(dt)) {
      const double out_tol = out_tol_16(dt);
      uint64_t seed = 5000;  // the same inputs (before rounding) for both types
      for (const ops::BatchNormShape& s : kShapes) {
        CAPTURE(s.n, s.c, s.hw);
        const int64_t n = s.n * s.c * s.hw;
        const auto C = static_cast<size_t>(s.c);
        const auto x16 = bits_16(dt, bn_input(s, ++seed));
        const auto x = values_16(dt, x16);
        Tensor x_ = upload_16(*this, dt, x16);

        // sum
        std::vector<double> sum_cpu(C);
        ops::batchnorm_sum_cpu(s, x.data(), sum_cpu.data());
        Tensor sum_ = device_zeros(Shape{s.c}, DType::F64);
        ops::batchnorm_sum_cuda(dt, ctx, s, x_.raw_data(), sum_.data<double>());
        REQUIRE_PARITY_F64(download_f64(*this, sum_), sum_cpu, kSumTol);

        // centred sum of squares, both from the CPU's mean
        std::vector<float> mean(C);
        for (size_t c = 0; c < C; ++c) mean[c] = static_cast<float>(sum_cpu[c] / static_cast<double>(s.n * s.hw));
        std::vector<double> m2_cpu(C);
        ops::batchnorm_centered_sumsq_cpu(s, x.data(), mean.data(), m2_cpu.data());
        Tensor mean_ = upload(Shape{s.c}, mean), m2_ = device_zeros(Shape{s.c}, DType::F64);
        settle();
        ops::batchnorm_centered_sumsq_cuda(dt, ctx, s, x_.raw_data(), mean_.data<float>(), m2_.data<double>());
        REQUIRE_PARITY_F64(download_f64(*this, m2_), m2_cpu, kSumTol);

        for (int relu = 0; relu < 2; ++relu) {
          CAPTURE(relu);
          // apply: into another buffer, then in place (y = x)
          const auto scale = random_vector(s.c, ++seed), shift = random_vector(s.c, ++seed);
          std::vector<float> y_cpu(static_cast<size_t>(n));
          ops::batchnorm_apply_cpu(s, x.data(), scale.data(), shift.data(), y_cpu.data(), relu);
          const auto y_ref = rounded_16(dt, y_cpu);
          Tensor scale_ = upload(Shape{s.c}, scale), shift_ = upload(Shape{s.c}, shift);
          Tensor y_ = upload_16(*this, dt, bits_16(dt, random_vector(n, ++seed)));  // garbage: must be overwritten
          Tensor xy_ = upload_16(*this, dt, x16);
          settle();
          ops::batchnorm_apply_cuda(dt, s, x_.raw_data(), scale_.data<float>(), shift_.data<float>(),
                                       y_.raw_data(), relu, ctx.raw_stream());
          ops::batchnorm_apply_cuda(dt, s, xy_.raw_data(), scale_.data<float>(), shift_.data<float>(),
                                       xy_.raw_data(), relu, ctx.raw_stream());
          const auto y_gpu = values_16(dt, download_16(*this, y_));
          LS_REQUIRE_PARITY(y_gpu, y_ref, out_tol);
          REQUIRE_16BIT_ROUNDING_OF(dt, y_gpu, y_cpu, kApplyTol);
          LS_REQUIRE_PARITY(values_16(dt, download_16(*this, xy_)), y_gpu, 0.0);  // in place: the same values

          // backward reduce: both sides mask with the CPU's y rounded to dt and
          // see the same dt dy.
          const auto yref16 = bits_16(dt, y_cpu);
          const auto yref = values_16(dt, yref16);
          const auto dy16 = bits_16(dt, random_vector(n, ++seed));
          auto dy_cpu = values_16(dt, dy16);
          std::vector<double> sdy_cpu(C), sdyx_cpu(C);
          ops::batchnorm_backward_reduce_cpu(s, x.data(), yref.data(), dy_cpu.data(), relu, mean.data(),
                                             sdy_cpu.data(), sdyx_cpu.data());
          Tensor yref_ = upload_16(*this, dt, yref16), dy_ = upload_16(*this, dt, dy16);
          Tensor sdy_ = device_zeros(Shape{s.c}, DType::F64), sdyx_ = device_zeros(Shape{s.c}, DType::F64);
          ops::batchnorm_backward_reduce_cuda(dt, ctx, s, x_.raw_data(), yref_.raw_data(), dy_.raw_data(), relu,
                                                 mean_.data<float>(), sdy_.data<double>(), sdyx_.data<double>());
          LS_REQUIRE_PARITY(values_16(dt, download_16(*this, dy_)), dy_cpu, 0.0);
          check_backward_sums(*this, s, x, mean, dy_cpu, sdy_, sdyx_, sdy_cpu, sdyx_cpu);

          // backward apply: into another buffer, then in place (dx = dy)
          const auto a = random_vector(s.c, ++seed), b = random_vector(s.c, ++seed), d = random_vector(s.c, ++seed);
          std::vector<float> dx_cpu(static_cast<size_t>(n));
          ops::batchnorm_backward_apply_cpu(s, x.data(), dy_cpu.data(), a.data(), b.data(), d.data(), dx_cpu.data());
          Tensor a_ = upload(Shape{s.c}, a), b_ = upload(Shape{s.c}, b), d_ = upload(Shape{s.c}, d);
          Tensor dx_ = upload_16(*this, dt, bits_16(dt, random_vector(n, ++seed)));  // garbage: must be overwritten
          settle();
          ops::batchnorm_backward_apply_cuda(dt, s, x_.raw_data(), dy_.raw_data(), a_.data<float>(),
                                                b_.data<float>(), d_.data<float>(), dx_.raw_data(), ctx.raw_stream());
          const auto dx_gpu = values_16(dt, download_16(*this, dx_));
          LS_REQUIRE_PARITY(dx_gpu, rounded_16(dt, dx_cpu), out_tol);
          REQUIRE_16BIT_ROUNDING_OF(dt, dx_gpu, dx_cpu, kApplyTol);
          ops::batchnorm_backward_apply_cuda(dt, s, x_.raw_data(), dy_.raw_data(), a_.data<float>(),
                                                b_.data<float>(), d_.data<float>(), dy_.raw_data(), ctx.raw_stream());
          LS_REQUIRE_PARITY(values_16(dt, download_16(*this, dy_)), dx_gpu, 0.0);  // in place: the same values
        }

        // apply with the residual join (r in dt too): y = max(0, x * scale +
        // shift + r) in fp32, rounded to dt once; into another buffer, then in
        // place into r
        const auto scale = random_vector(s.c, ++seed), shift = random_vector(s.c, ++seed);
        const auto r16 = bits_16(dt, random_vector(n, ++seed));
        const auto r = values_16(dt, r16);
        std::vector<float> y_cpu(static_cast<size_t>(n));
        ops::batchnorm_apply_add_relu_cpu(s, x.data(), scale.data(), shift.data(), r.data(), y_cpu.data());
        Tensor scale_ = upload(Shape{s.c}, scale), shift_ = upload(Shape{s.c}, shift);
        Tensor r_ = upload_16(*this, dt, r16);
        Tensor y_ = upload_16(*this, dt, bits_16(dt, random_vector(n, ++seed)));  // garbage: must be overwritten
        settle();
        ops::batchnorm_apply_add_relu_cuda(dt, s, x_.raw_data(), scale_.data<float>(), shift_.data<float>(),
                                              r_.raw_data(), y_.raw_data(), ctx.raw_stream());
        const auto y_gpu = values_16(dt, download_16(*this, y_));
        LS_REQUIRE_PARITY(y_gpu, rounded_16(dt, y_cpu), out_tol);
        REQUIRE_16BIT_ROUNDING_OF(dt, y_gpu, y_cpu, kApplyTol);
        ops::batchnorm_apply_add_relu_cuda(dt, s, x_.raw_data(), scale_.data<float>(), shift_.data<float>(),
                                              r_.raw_data(), r_.raw_data(), ctx.raw_stream());
        LS_REQUIRE_PARITY(values_16(dt, download_16(*this, r_)), y_gpu, 0.0);  // in place: the same values
      }
    }
}

TEST_CASE_METHOD(GpuFixture, "batchnorm per-channel math kernels reproduce nn/batchnorm.cpp exactly", "[batchnorm]") {
  const int64_t C = 37;
  const auto Cs = static_cast<size_t>(C);
  const float eps = 1e-5f, momentum = 0.1f;
  const double count = 6272.0;
  // Inputs as a layer would have them: sums of `count` values, positive m2.
  std::vector<double> sum(Cs), m2(Cs), sdy(Cs), sdyx(Cs);
  {
    const auto r = random_vector(4 * C, 11);
    for (size_t c = 0; c < Cs; ++c) {
      sum[c] = count * 2.0 * r[c];
      m2[c] = count * (0.01 + std::abs(r[Cs + c]));
      sdy[c] = 50.0 * r[2 * Cs + c];
      sdyx[c] = 30.0 * r[3 * Cs + c];
    }
  }
  const auto gamma = random_vector(C, 12, 0.5f, 1.5f), beta = random_vector(C, 13);
  const auto rm0 = random_vector(C, 14), rv0 = random_vector(C, 15, 0.5f, 2.f);
  const auto dgamma0 = random_vector(C, 16), dbeta0 = random_vector(C, 17);

  // Host replica: nn/batchnorm.cpp, expression by expression.
  std::vector<float> mean(Cs), invstd(Cs), scale(Cs), shift(Cs), rm = rm0, rv = rv0;
  for (size_t c = 0; c < Cs; ++c) mean[c] = static_cast<float>(sum[c] / count);
  for (size_t c = 0; c < Cs; ++c) {
    const double var = m2[c] / count;
    invstd[c] = static_cast<float>(1.0 / std::sqrt(var + eps));
    rm[c] = static_cast<float>((1.0 - momentum) * rm[c] + momentum * mean[c]);
    rv[c] = static_cast<float>((1.0 - momentum) * rv[c] + momentum * var * count / (count - 1));
  }
  for (size_t c = 0; c < Cs; ++c) {
    scale[c] = gamma[c] * invstd[c];
    shift[c] = beta[c] - mean[c] * scale[c];
  }
  std::vector<float> emean(Cs), einvstd(Cs), escale(Cs), eshift(Cs);
  for (size_t c = 0; c < Cs; ++c) {
    emean[c] = rm0[c];
    einvstd[c] = 1.f / std::sqrt(rv0[c] + eps);
    escale[c] = gamma[c] * einvstd[c];
    eshift[c] = beta[c] - emean[c] * escale[c];
  }

  Tensor sum_ = upload_f64(*this, sum), m2_ = upload_f64(*this, m2), count_ = upload_f64(*this, {count});
  Tensor sdy_ = upload_f64(*this, sdy), sdyx_ = upload_f64(*this, sdyx);
  Tensor gamma_ = upload(Shape{C}, gamma), beta_ = upload(Shape{C}, beta);
  Tensor rm_ = upload(Shape{C}, rm0), rv_ = upload(Shape{C}, rv0);
  Tensor mean_ = device_zeros(Shape{C}), invstd_ = device_zeros(Shape{C}), scale_ = device_zeros(Shape{C}),
         shift_ = device_zeros(Shape{C});
  settle();
  const cudaStream_t st = ctx.raw_stream();

  SECTION("training statistics and running averages") {
    ops::batchnorm_mean_cuda(C, sum_.data<double>(), count_.data<double>(), mean_.data<float>(), st);
    ops::batchnorm_finalize_stats_cuda(C, m2_.data<double>(), count_.data<double>(), mean_.data<float>(),
                                       gamma_.data<float>(), beta_.data<float>(), eps, momentum, invstd_.data<float>(),
                                       scale_.data<float>(), shift_.data<float>(), rm_.data<float>(), rv_.data<float>(),
                                       st);
    LS_REQUIRE_PARITY(download(mean_), mean, kMathTol);
    LS_REQUIRE_PARITY(download(invstd_), invstd, kMathTol);
    LS_REQUIRE_PARITY(download(scale_), scale, kMathTol);
    LS_REQUIRE_PARITY(download(shift_), shift, kMathTol);
    LS_REQUIRE_PARITY(download(rm_), rm, kMathTol);
    LS_REQUIRE_PARITY(download(rv_), rv, kMathTol);
  }
  SECTION("count") {
    Tensor cnt_ = device_zeros(Shape{1}, DType::F64);
    ops::batchnorm_count_cuda(ops::BatchNormShape{32, 5, 196}, cnt_.data<double>(), st);
    CHECK(download_f64(*this, cnt_) == std::vector<double>{32.0 * 196.0});
  }
  SECTION("evaluation statistics") {
    ops::batchnorm_eval_stats_cuda(C, rm_.data<float>(), rv_.data<float>(), gamma_.data<float>(), beta_.data<float>(),
                                   eps, mean_.data<float>(), invstd_.data<float>(), scale_.data<float>(),
                                   shift_.data<float>(), st);
    LS_REQUIRE_PARITY(download(mean_), emean, kMathTol);
    LS_REQUIRE_PARITY(download(invstd_), einvstd, kMathTol);
    LS_REQUIRE_PARITY(download(scale_), escale, kMathTol);
    LS_REQUIRE_PARITY(download(shift_), eshift, kMathTol);
  }
  SECTION("parameter gradients") {
    for (int accumulate = 0; accumulate < 2; ++accumulate) {
      CAPTURE(accumulate);
      std::vector<float> dgamma = dgamma0, dbeta = dbeta0;
      for (size_t c = 0; c < Cs; ++c) {
        const auto g = static_cast<float>(sdyx[c] * invstd[c]), bsum = static_cast<float>(sdy[c]);
        dgamma[c] = accumulate ? dgamma[c] + g : g;
        dbeta[c] = accumulate ? dbeta[c] + bsum : bsum;
      }
      Tensor invstd_in = upload(Shape{C}, invstd), dgamma_ = upload(Shape{C}, dgamma0),
             dbeta_ = upload(Shape{C}, dbeta0);
      settle();
      ops::batchnorm_param_grads_cuda(C, sdy_.data<double>(), sdyx_.data<double>(), invstd_in.data<float>(),
                                      dgamma_.data<float>(), dbeta_.data<float>(), accumulate, st);
      LS_REQUIRE_PARITY(download(dgamma_), dgamma, kMathTol);
      LS_REQUIRE_PARITY(download(dbeta_), dbeta, kMathTol);
    }
  }
  SECTION("backward coefficients") {
    for (int training = 0; training < 2; ++training) {
      CAPTURE(training);
      const std::vector<float>& m = training ? mean : emean;
      const std::vector<float>& is = training ? invstd : einvstd;
      std::vector<float> a(Cs), b(Cs), d(Cs);
      for (size_t c = 0; c < Cs; ++c) {
        const double av = static_cast<double>(gamma[c]) * is[c];
        if (!training) {
          a[c] = static_cast<float>(av);
          b[c] = d[c] = 0.f;
          continue;
        }
        const double mean_dy = sdy[c] / count, mean_dy_xmu = sdyx[c] / count;
        const double bv = -av * static_cast<double>(is[c]) * is[c] * mean_dy_xmu;
        a[c] = static_cast<float>(av);
        b[c] = static_cast<float>(bv);
        d[c] = static_cast<float>(-av * mean_dy - bv * m[c]);
      }
      Tensor m_in = upload(Shape{C}, m), is_in = upload(Shape{C}, is);
      Tensor a_ = device_zeros(Shape{C}), b_ = device_zeros(Shape{C}), d_ = device_zeros(Shape{C});
      settle();
      ops::batchnorm_backward_coeffs_cuda(C, training, sdy_.data<double>(), sdyx_.data<double>(),
                                          training ? count_.data<double>() : nullptr, m_in.data<float>(),
                                          is_in.data<float>(), gamma_.data<float>(), a_.data<float>(),
                                          b_.data<float>(), d_.data<float>(), st);
      LS_REQUIRE_PARITY(download(a_), a, kMathTol);
      LS_REQUIRE_PARITY(download(b_), b, kMathTol);
      LS_REQUIRE_PARITY(download(d_), d, kMathTol);
    }
  }
}

TEST_CASE_METHOD(GpuFixture, "batchnorm device pipeline matches the BatchNorm2d layer", "[batchnorm]") {
  struct LayerCase {
    int64_t n, c, h, w;
  };
  const LayerCase cases[] = {{3, 6, 7, 9}, {2, 16, 14, 14}, {1, 4, 5, 5}};
  uint64_t seed = 7000;
  for (const LayerCase& lc : cases)
    for (int relu = 0; relu < 2; ++relu)
      for (int accumulate = 0; accumulate < 2; ++accumulate) {
        CAPTURE(lc.n, lc.c, lc.h, lc.w, relu, accumulate);
        const ops::BatchNormShape s{lc.n, lc.c, lc.h * lc.w};
        const int64_t C = lc.c, n = s.n * s.c * s.hw;
        const Shape xshape{lc.n, lc.c, lc.h, lc.w};
        const float eps = 1e-5f, momentum = 0.1f;

        // The CPU layer, with random parameters, running statistics and gradients.
        BatchNorm2d bn(C, eps, momentum);
        ParameterStore params, buffers;
        bn.declare(params, "bn.");
        bn.declare_buffers(buffers, "bn.");
        params.finalize();
        buffers.finalize();
        bn.fuse_relu(relu);
        const Parameter* weight = params.find("bn.weight");
        const Parameter* bias = params.find("bn.bias");
        const Parameter* rmean = buffers.find("bn.running_mean");
        const Parameter* rvar = buffers.find("bn.running_var");
        REQUIRE((weight && bias && rmean && rvar));
        const auto gamma = random_vector(C, ++seed, 0.5f, 1.5f), beta = random_vector(C, ++seed);
        const auto rm0 = random_vector(C, ++seed), rv0 = random_vector(C, ++seed, 0.5f, 2.f);
        const auto dgamma0 = random_vector(C, ++seed), dbeta0 = random_vector(C, ++seed);
        std::copy(gamma.begin(), gamma.end(), weight->value.data<float>());
        std::copy(beta.begin(), beta.end(), bias->value.data<float>());
        std::copy(rm0.begin(), rm0.end(), rmean->value.data<float>());
        std::copy(rv0.begin(), rv0.end(), rvar->value.data<float>());
        std::copy(dgamma0.begin(), dgamma0.end(), weight->grad.data<float>());
        std::copy(dbeta0.begin(), dbeta0.end(), bias->grad.data<float>());

        // The device state a GPU layer would hold.
        Tensor gamma_ = upload(Shape{C}, gamma), beta_ = upload(Shape{C}, beta);
        Tensor rm_ = upload(Shape{C}, rm0), rv_ = upload(Shape{C}, rv0);
        Tensor dgamma_ = upload(Shape{C}, dgamma0), dbeta_ = upload(Shape{C}, dbeta0);
        Tensor sum_ = device_zeros(Shape{C}, DType::F64), m2_ = device_zeros(Shape{C}, DType::F64);
        Tensor count_ = device_zeros(Shape{1}, DType::F64);
        Tensor sdy_ = device_zeros(Shape{C}, DType::F64), sdyx_ = device_zeros(Shape{C}, DType::F64);
        Tensor mean_ = device_zeros(Shape{C}), invstd_ = device_zeros(Shape{C}), scale_ = device_zeros(Shape{C}),
               shift_ = device_zeros(Shape{C});
        Tensor a_ = device_zeros(Shape{C}), b_ = device_zeros(Shape{C}), d_ = device_zeros(Shape{C});
        const cudaStream_t st = ctx.raw_stream();

        // Two training steps, then an evaluation step.
        for (int step = 0; step < 3; ++step) {
          const bool training = step < 2;
          CAPTURE(step);
          const auto x = bn_input(s, ++seed), dy = random_vector(n, ++seed);
          Tensor xt = Tensor::from_vector(xshape, x), yt = Tensor::zeros(xshape);
          ForwardContext fc;
          fc.training = training;
          bn.forward(xt, yt, fc);
          Tensor dyt = Tensor::from_vector(xshape, dy), dxt = Tensor::zeros(xshape);
          BackwardContext bc;
          bc.accumulate = accumulate;
          bn.backward(xt, yt, dyt, &dxt, bc);

          Tensor x_ = upload(Shape{n}, x), y_ = device_zeros(Shape{n});
          settle();
          if (training) {
            ops::batchnorm_sum_cuda(DType::F32, ctx, s, x_.data<float>(), sum_.data<double>());
            ops::batchnorm_count_cuda(s, count_.data<double>(), st);
            ops::batchnorm_mean_cuda(C, sum_.data<double>(), count_.data<double>(), mean_.data<float>(), st);
            ops::batchnorm_centered_sumsq_cuda(DType::F32, ctx, s, x_.data<float>(), mean_.data<float>(), m2_.data<double>());
            ops::batchnorm_finalize_stats_cuda(C, m2_.data<double>(), count_.data<double>(), mean_.data<float>(),
                                               gamma_.data<float>(), beta_.data<float>(), eps, momentum,
                                               invstd_.data<float>(), scale_.data<float>(), shift_.data<float>(),
                                               rm_.data<float>(), rv_.data<float>(), st);
          } else {
            ops::batchnorm_eval_stats_cuda(C, rm_.data<float>(), rv_.data<float>(), gamma_.data<float>(),
                                           beta_.data<float>(), eps, mean_.data<float>(), invstd_.data<float>(),
                                           scale_.data<float>(), shift_.data<float>(), st);
          }
          ops::batchnorm_apply_cuda(DType::F32, s, x_.data<float>(), scale_.data<float>(), shift_.data<float>(), y_.data<float>(),
                                    relu, st);
          LS_REQUIRE_PARITY(download(y_), yt.to_vector(), kLayerForwardTol);
          LS_REQUIRE_PARITY(download(rm_), rmean->value.to_vector(), kLayerForwardTol);
          LS_REQUIRE_PARITY(download(rv_), rvar->value.to_vector(), kLayerForwardTol);

          // Backward; the device side masks with the CPU's y (same mask).
          Tensor yref_ = upload(Shape{n}, yt.to_vector()), dy_ = upload(Shape{n}, dy), dx_ = device_zeros(Shape{n});
          settle();
          ops::batchnorm_backward_reduce_cuda(DType::F32, ctx, s, x_.data<float>(), yref_.data<float>(), dy_.data<float>(), relu,
                                              mean_.data<float>(), sdy_.data<double>(), sdyx_.data<double>());
          ops::batchnorm_param_grads_cuda(C, sdy_.data<double>(), sdyx_.data<double>(), invstd_.data<float>(),
                                          dgamma_.data<float>(), dbeta_.data<float>(), accumulate, st);
          ops::batchnorm_backward_coeffs_cuda(C, training, sdy_.data<double>(), sdyx_.data<double>(),
                                              count_.data<double>(), mean_.data<float>(), invstd_.data<float>(),
                                              gamma_.data<float>(), a_.data<float>(), b_.data<float>(),
                                              d_.data<float>(), st);
          ops::batchnorm_backward_apply_cuda(DType::F32, s, x_.data<float>(), dy_.data<float>(), a_.data<float>(),
                                             b_.data<float>(), d_.data<float>(), dx_.data<float>(), st);
          LS_REQUIRE_PARITY(download(dy_), dyt.to_vector(), 0.0);
          LS_REQUIRE_PARITY(download(dgamma_), weight->grad.to_vector(), kLayerBackwardTol);
          LS_REQUIRE_PARITY(download(dbeta_), bias->grad.to_vector(), kLayerBackwardTol);
          LS_REQUIRE_PARITY(download(dx_), dxt.to_vector(), kLayerBackwardTol);
        }
      }
}

// The channels-last reductions take 16 bytes of channels per thread when C and
// every pointer allow, else one channel; each channel is summed in the same
// order either way, so the bits must agree. The same inputs at an address one
// element past a 16-byte boundary force the one-channel kernel.
TEST_CASE_METHOD(GpuFixture, "NHWC batchnorm reductions give the same bits 16 bytes or one channel per thread",
                 "[batchnorm]") {
  for (const DType dt : {DType::F32, DType::BF16, DType::F16})
    for (const ops::BatchNormShape& s : {ops::BatchNormShape{6272, 256, 1}, ops::BatchNormShape{300, 72, 1}}) {
      CAPTURE(dtype_name(dt), s.n, s.c);
      const int64_t n = s.n * s.c, es = static_cast<int64_t>(size_of(dt));
      // x, y, dy as dt bits (fp32: the floats' bits), each twice: at the start
      // of a buffer (aligned) and one element in (not).
      const auto bits_of = [&](const std::vector<float>& v) {
        std::vector<uint8_t> b(static_cast<size_t>(n * es));
        if (dt == DType::F32) {
          std::memcpy(b.data(), v.data(), b.size());
        } else {
          const auto h = bits_16(dt, v);
          std::memcpy(b.data(), h.data(), b.size());
        }
        return b;
      };
      const auto x = bits_of(bn_input(s, 71)), y = bits_of(random_vector(n, 72)), dy = bits_of(random_vector(n, 73));
      const auto mean = random_vector(s.c, 74, -3.f, 3.f);
      Tensor mean_ = upload(Shape{s.c}, mean);
      // One device buffer per array with room for the one-element shift.
      const auto place = [&](const std::vector<uint8_t>& b, int64_t shift) {
        Tensor t = device_zeros(Shape{(n + 1) * es}, DType::U8);
        settle();
        LS_CUDA_CHECK(cudaMemcpy(static_cast<char*>(t.raw_data()) + shift * es, b.data(), b.size(),
                                 cudaMemcpyHostToDevice));
        return t;
      };
      struct Sums {
        std::vector<double> sum, m2, sdy, sdyx;
        std::vector<uint8_t> dy_masked;
      };
      const auto run = [&](int64_t shift) {
        Tensor x_ = place(x, shift), y_ = place(y, shift), dy_ = place(dy, shift);
        const auto at = [&](const Tensor& t) { return static_cast<char*>(t.raw_data()) + shift * es; };
        Tensor sum_ = device_zeros(Shape{s.c}, DType::F64), m2_ = device_zeros(Shape{s.c}, DType::F64);
        Tensor sdy_ = device_zeros(Shape{s.c}, DType::F64), sdyx_ = device_zeros(Shape{s.c}, DType::F64);
        settle();
        if (dt == DType::F32) {
          ops::batchnorm_sum_cuda(DType::F32, ctx, s, reinterpret_cast<const float*>(at(x_)), sum_.data<double>());
          ops::batchnorm_centered_sumsq_cuda(DType::F32, ctx, s, reinterpret_cast<const float*>(at(x_)), mean_.data<float>(),
                                             m2_.data<double>());
          ops::batchnorm_backward_reduce_cuda(DType::F32, ctx, s, reinterpret_cast<const float*>(at(x_)),
                                              reinterpret_cast<const float*>(at(y_)),
                                              reinterpret_cast<float*>(at(dy_)), /*relu=*/true, mean_.data<float>(),
                                              sdy_.data<double>(), sdyx_.data<double>());
        } else {
          ops::batchnorm_sum_cuda(dt, ctx, s, at(x_), sum_.data<double>());
          ops::batchnorm_centered_sumsq_cuda(dt, ctx, s, at(x_), mean_.data<float>(), m2_.data<double>());
          ops::batchnorm_backward_reduce_cuda(dt, ctx, s, at(x_), at(y_), at(dy_), /*relu=*/true,
                                                 mean_.data<float>(), sdy_.data<double>(), sdyx_.data<double>());
        }
        Sums r{download_f64(*this, sum_), download_f64(*this, m2_), download_f64(*this, sdy_),
               download_f64(*this, sdyx_), std::vector<uint8_t>(static_cast<size_t>(n * es))};
        LS_CUDA_CHECK(cudaMemcpy(r.dy_masked.data(), at(dy_), r.dy_masked.size(), cudaMemcpyDeviceToHost));
        return r;
      };
      const Sums packed = run(0), single = run(1);
      CHECK(packed.sum == single.sum);
      CHECK(packed.m2 == single.m2);
      CHECK(packed.sdy == single.sdy);
      CHECK(packed.sdyx == single.sdyx);
      CHECK(packed.dy_masked == single.dy_masked);
      CHECK(packed.dy_masked != dy);  // the ReLU mask changed something
    }
}
