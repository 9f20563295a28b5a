// ConvPlan (ops/conv/conv_plan.h): the candidate plans cuDNN's graph API offers
// for a convolution (the first 16, twice what the race takes) -- forward,
// backward data and backward filter; bf16, fp16 and fp32 -- are checked
// against the CPU's result on the same inputs (16-bit rounded), in NCHW and
// NHWC, under the deterministic rules and under any-algorithm rules; the
// rules themselves (determinism, the workspace limit) hold for every
// candidate; the race inside Conv2dCuda (ConvSearch::Benchmark) keeps the
// parity of y, dx and dw whichever side wins each direction; and the race's
// device-side measure (ops/disagreement/disagreement_cuda.h) equals the host one.
//
// Bounds, in ops/disagreement/disagreement.h's measure against the CPU: every 16-bit
// candidate within 4 x disagreement_bound_16 (bf16 2^-4, fp16 2^-7), so each
// computes the convolution (an indexing error is off by O(1) on this scale);
// every fp32 candidate within 2 x disagreement_bound_f32 (2.4e-4): room for
// FFT or Winograd engines, whose transforms round (not measured here yet),
// while an engine reading TF32 inputs is at 4.3e-4 or more (the CPU test of
// the bound). The race inside Conv2dCuda admits only plans within 1 x of the
// legacy algorithm; its 16-bit results are checked at that bound against the
// CPU, its fp32 results at twice it (the legacy algorithm it is measured
// against may itself be an FFT or Winograd one). Some engines round partial sums
// in the 16-bit type without saying so: on an H100 (2026-11-24) filter-gradient
// engine 17 on the NCHW 5x5 case was 0.0079 from the CPU in fp16 (the race's
// bound: 0.0078), and 5.4e-2 of max(1, |dw|) in bf16. The per-candidate checks
// do not stop at the first failure, so one run lists every offending engine.
// Last, the race's timing (fastest_of) is checked to leave the host's cost out.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "cuda/check.h"
#include "gpu_test_util.h"
#include "ops/conv/conv2d_cpu.h"
#include "ops/conv/conv2d_cuda.h"
#include "ops/conv/conv_plan.h"
#include "ops/disagreement/disagreement.h"
#include "ops/disagreement/disagreement_cuda.h"

using namespace lockstep;
using namespace lockstep::testing;

namespace {

struct PlanCase {
  int64_t n, c, h, w, oc, k, stride, pad;
};
const PlanCase kPlanCases[] = {
    {8, 16, 12, 12, 32, 5, 1, 2},  // convnet's 5x5 'same' layer, scaled down
    {3, 8, 7, 7, 16, 1, 1, 0},     // 1x1
    {2, 16, 14, 14, 8, 3, 2, 1},   // 3x3 stride 2
    {2, 32, 14, 14, 64, 3, 1, 1},  // more channels
};
constexpr ops::ConvDirection kDirections[] = {ops::ConvDirection::Forward, ops::ConvDirection::BackwardData,
                                              ops::ConvDirection::BackwardFilter};

ops::Conv2dShape plan_shape(const PlanCase& k) {
  const int64_t oh = (k.h + 2 * k.pad - k.k) / k.stride + 1, ow = (k.w + 2 * k.pad - k.k) / k.stride + 1;
  return {k.n, k.oc, ops::ConvGeometry{k.c, k.h, k.w, k.k, k.k, k.stride, k.pad, oh, ow}};
}
ops::ConvPlanShape plan_shape(const ops::Conv2dShape& s, bool nhwc) {
  return {s.n, s.g.c, s.g.h, s.g.w, s.oc, s.g.kh, s.g.kw, s.g.oh, s.g.ow, s.g.pad, s.g.stride, nhwc};
}

// Random values as dt holds them (16-bit: rounded), and their device tensor.
std::vector<float> held_values(DType dt, int64_t n, uint64_t seed) {
  const auto v = random_vector(n, seed);
  return dt == DType::F32 ? v : rounded_16(dt, v);
}
Tensor to_device(GpuFixture& f, DType dt, const std::vector<float>& v) {
  if (dt == DType::F32) return f.upload(Shape{static_cast<int64_t>(v.size())}, v);
  return upload_16(f, dt, bits_16(dt, v));
}
std::vector<float> to_host(GpuFixture& f, const Tensor& t) {
  return t.dtype() == DType::F32 ? f.download(t) : values_16(t.dtype(), download_16(f, t));
}
cudnnDataType_t cudnn_type(DType dt) {
  return dt == DType::BF16 ? CUDNN_DATA_BFLOAT16 : dt == DType::F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}
// The race's admission bound for dt (ops/disagreement/disagreement.h).
double race_bound(DType dt) {
  return dt == DType::F32 ? ops::disagreement_bound_f32() : ops::disagreement_bound_16(dt == DType::BF16);
}

// The CPU's y, dx and dw for x, w and dy: no bias, no ReLU.
struct CpuResults {
  std::vector<float> y, dx, dw;
};
CpuResults cpu_results(const ops::Conv2dShape& s, const std::vector<float>& x, const std::vector<float>& w,
                       std::vector<float> dy) {
  CpuResults r{std::vector<float>(dy.size()), std::vector<float>(x.size()), std::vector<float>(w.size())};
  ops::Workspace ws;
  ops::conv2d_forward_cpu(s, x.data(), w.data(), nullptr, r.y.data(), false, ws);
  ops::conv2d_backward_cpu(s, x.data(), w.data(), r.y.data(), dy.data(), r.dx.data(), r.dw.data(), nullptr, false,
                           false, ws);
  return r;
}

}  // namespace

TEST_CASE_METHOD(GpuFixture, "every graph-API convolution plan matches the CPU", "[conv]") {
  uint64_t seed = 31000;
  for (const DType dt : {DType::BF16, DType::F16, DType::F32})
    for (const bool nhwc : {false, true})
      for (const bool deterministic : {true, false})
        for (const PlanCase& k : kPlanCases) {
          const ops::Conv2dShape s = plan_shape(k);
          CAPTURE(dtype_name(dt), nhwc, deterministic, k.n, k.c, k.h, k.w, k.oc, k.k, k.stride, k.pad);
          const int64_t nx = s.n * s.g.c * s.g.h * s.g.w, ny = s.n * s.oc * s.g.p(), nw = s.oc * s.g.k();
          const int64_t khw = s.g.kh * s.g.kw;
          const auto x = held_values(dt, nx, seed += 10), dy = held_values(dt, ny, seed + 1),
                     w = held_values(dt, nw, seed + 2);
          const CpuResults cpu = cpu_results(s, x, w, dy);
          const double bound = dt == DType::F32 ? 2 * ops::disagreement_bound_f32() : 4 * race_bound(dt);

          // Device operands in the layout's memory order (NHWC: the filter [OC, KH, KW, C]).
          Tensor x_ = to_device(*this, dt, nhwc ? reorder(x, s.n, s.g.c, s.g.h * s.g.w, true) : x);
          Tensor w_ = to_device(*this, dt, nhwc ? reorder(w, s.oc, s.g.c, khw, true) : w);
          Tensor dy_ = to_device(*this, dt, nhwc ? reorder(dy, s.n, s.oc, s.g.p(), true) : dy);
          for (const ops::ConvDirection dir : kDirections) {
            CAPTURE(ops::direction_name(dir));
            // The first 16 of the heuristics' list: twice what the race takes
            // (all of them, 4.5 times the plans of the filter-gradient-only
            // test, would cost minutes of a time-limited GPU call).
            const auto plans = ops::ConvPlan::candidates(ctx.cudnn(), dir, cudnn_type(dt), plan_shape(s, nhwc),
                                                         deterministic, size_t{1} << 30, /*max_candidates=*/16);
            INFO(plans.size() << " candidate plans");
            // Tensor-core kernels read channels-last natively: cuDNN must offer
            // some there in 16 bits (fp32 rules tensor cores out).
            if (nhwc && dt != DType::F32) REQUIRE(!plans.empty());
            // The output, its CPU twin, and how to bring it back to NCHW order.
            const bool fwd = dir == ops::ConvDirection::Forward, data = dir == ops::ConvDirection::BackwardData;
            const int64_t count = fwd ? ny : data ? nx : nw;
            const std::vector<float>& want = fwd ? cpu.y : data ? cpu.dx : cpu.dw;
            Tensor out_ = device_zeros(Shape{count}, dt);
            size_t ws_bytes = 0;
            for (const auto& p : plans) ws_bytes = std::max(ws_bytes, p.workspace_bytes());
            LS_CUDA_CHECK(cudaDeviceSynchronize());
            for (const auto& p : plans) {
              CAPTURE(p.engine(), p.workspace_bytes(), p.deterministic());
              CHECK(p.direction() == dir);
              if (deterministic) CHECK(p.deterministic());
              LS_CUDA_CHECK(cudaMemsetAsync(out_.raw_data(), 0xff, out_.nbytes(), ctx.raw_stream()));
              void* ws = ctx.workspace(ws_bytes);
              if (fwd)
                p.run(ctx.cudnn(), x_.raw_data(), w_.raw_data(), out_.raw_data(), ws);
              else if (data)
                p.run(ctx.cudnn(), w_.raw_data(), dy_.raw_data(), out_.raw_data(), ws);
              else
                p.run(ctx.cudnn(), x_.raw_data(), dy_.raw_data(), out_.raw_data(), ws);
              auto got = to_host(*this, out_);
              if (nhwc)  // back to NCHW order
                got = fwd    ? reorder(got, s.n, s.oc, s.g.p(), false)
                      : data ? reorder(got, s.n, s.g.c, s.g.h * s.g.w, false)
                             : reorder(got, s.oc, s.g.c, khw, false);
              const double d = ops::disagreement(want, got);
              INFO("disagreement with the CPU " << d << " (bound " << bound << ")");
              CHECK(d <= bound);
            }
          }
        }
}

TEST_CASE_METHOD(GpuFixture, "graph-API convolution plans keep to the workspace limit", "[conv]") {
  const ops::Conv2dShape s = plan_shape(kPlanCases[0]);
  for (const ops::ConvDirection dir : kDirections) {
    CAPTURE(ops::direction_name(dir));
    const auto fs = plan_shape(s, true);
    const auto wide = ops::ConvPlan::candidates(ctx.cudnn(), dir, CUDNN_DATA_BFLOAT16, fs, false, size_t{1} << 30, 64);
    const auto none = ops::ConvPlan::candidates(ctx.cudnn(), dir, CUDNN_DATA_BFLOAT16, fs, false, 0, 64);
    REQUIRE(!wide.empty());
    for (const auto& p : none) CHECK(p.workspace_bytes() == 0);
    const auto two = ops::ConvPlan::candidates(ctx.cudnn(), dir, CUDNN_DATA_BFLOAT16, fs, false, size_t{1} << 30, 2);
    CHECK(two.size() == std::min<size_t>(2, wide.size()));
  }
}

// Under ConvSearch::Benchmark the first call of each direction races the
// plans against the legacy algorithm; whichever wins, y, dx and dw match the
// CPU, and the same batch size keeps the decisions (a second call gives the
// same bits). Each race reports one line; a decided size races no more.
TEST_CASE_METHOD(GpuFixture, "conv2d after the timed races matches the CPU and repeats", "[conv]") {
  ctx.set_conv_policy({cuda::ConvSearch::Benchmark, true, cuda::ConvPolicy::kDefaultWorkspaceLimit});
  std::vector<std::string> reports;
  ctx.set_conv_report([&](const std::string& line) { reports.push_back(line); });
  for (const DType dt : {DType::BF16, DType::F16, DType::F32})
    for (const Layout layout : {Layout::NCHW, Layout::NHWC}) {
      const ops::Conv2dShape s = plan_shape(kPlanCases[0]);
      const bool nhwc = layout == Layout::NHWC;
      CAPTURE(dtype_name(dt), nhwc);
      const double bound = dt == DType::F32 ? 2 * race_bound(dt) : race_bound(dt);
      const int64_t nx = s.n * s.g.c * s.g.h * s.g.w, ny = s.n * s.oc * s.g.p(), nw = s.oc * s.g.k();
      const auto x = held_values(dt, nx, 41), w = held_values(dt, nw, 42), dy = held_values(dt, ny, 43);
      const CpuResults cpu = cpu_results(s, x, w, dy);
      const ops::ConvData data = dt == DType::BF16 ? ops::ConvData::BF16
                                 : dt == DType::F16 ? ops::ConvData::F16
                                                    : ops::ConvData::F32;
      ops::Conv2dCuda conv(s.oc, s.g, data, layout);
      Tensor x_ = to_device(*this, dt, nhwc ? reorder(x, s.n, s.g.c, s.g.h * s.g.w, true) : x);
      Tensor w_ = to_device(*this, dt, w);
      const auto dy_held = nhwc ? reorder(dy, s.n, s.oc, s.g.p(), true) : dy;
      Tensor y_ = device_zeros(Shape{ny}, dt), dx_ = device_zeros(Shape{nx}, dt), dw_ = device_zeros(Shape{nw});
      LS_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<float> first_y, first_dx, first_dw;
      for (int round = 0; round < 2; ++round) {
        CAPTURE(round);
        reports.clear();
        Tensor dy_ = to_device(*this, dt, dy_held);
        if (dt == DType::F32) {
          conv.forward(ctx, s.n, x_.data<float>(), w_.data<float>(), nullptr, y_.data<float>(), /*relu=*/false);
          conv.backward(ctx, s.n, x_.data<float>(), w_.data<float>(), nullptr, dy_.data<float>(),
                        dx_.data<float>(), dw_.data<float>(), nullptr, /*accumulate=*/false, /*relu=*/false);
        } else {
          conv.forward(ctx, s.n, x_.raw_data(), w_.raw_data(), nullptr, y_.raw_data(), /*relu=*/false);
          conv.backward(ctx, s.n, x_.raw_data(), w_.raw_data(), nullptr, dy_.raw_data(), dx_.raw_data(),
                           dw_.data<float>(), nullptr, /*accumulate=*/false, /*relu=*/false);
        }
        auto y = to_host(*this, y_), dx = to_host(*this, dx_);
        const auto dw = download(dw_);
        const auto algos = conv.algorithms(ctx, s.n);
        INFO("legacy algorithms " << algos.forward << ", " << algos.backward_data << ", " << algos.backward_filter
                                  << "; graph-API engines " << algos.forward_engine << ", "
                                  << algos.backward_data_engine << ", " << algos.backward_filter_engine);
        CHECK(algos.deterministic);
        if (nhwc) {
          y = reorder(y, s.n, s.oc, s.g.p(), false);
          dx = reorder(dx, s.n, s.g.c, s.g.h * s.g.w, false);
        }
        CHECK(ops::disagreement(cpu.y, y) <= bound);
        CHECK(ops::disagreement(cpu.dx, dx) <= bound);
        CHECK(ops::disagreement(cpu.dw, dw) <= bound);
        std::string all;
        for (const std::string& line : reports) all += line + "\n";
        INFO("race reports:\n" << all);
        if (round == 0) {
          REQUIRE(reports.size() == 3);  // forward, backward filter, backward data, in the order they ran
          // "DIRECTION: [reference algorithm R, ]legacy algorithm A ..."
          const auto names = [](const std::string& line, const std::string& dir) {
            const size_t at = line.find(dir + ": ");
            return at != std::string::npos && line.find("legacy algorithm ", at) != std::string::npos;
          };
          CHECK(names(reports[0], "forward"));
          CHECK(names(reports[1], "backward filter"));
          CHECK(names(reports[2], "backward data"));
          for (const std::string& line : reports) {
            CHECK((line.find("; kept ") != std::string::npos ||
                   line.find("no graph-API plan passes the rules") != std::string::npos));
            // A plan kept comes with its time: an engine can enter with several knob settings.
            if (line.find("; kept engine ") != std::string::npos) CHECK(line.substr(line.size() - 4) == " ms)");
          }
        } else {
          CHECK(reports.empty());
        }
        if (round == 0) {
          first_y = y;
          first_dx = dx;
          first_dw = dw;
        } else {
          CHECK(y == first_y);
          CHECK(dx == first_dx);
          CHECK(dw == first_dw);
        }
      }
    }
}

// The race's device-side measure against ops/disagreement/disagreement.h on the host, on
// data the conversions keep exact (16-bit values widened; fp32 as is): equal
// to rounding of the final division, and the same conventions for NaN, inf,
// zeros and the empty case.
TEST_CASE_METHOD(GpuFixture, "disagreement measured on the GPU equals the host's", "[conv]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const DType dt : {DType::F32, DType::BF16, DType::F16}) {
    CAPTURE(dtype_name(dt));
    // Values as dt holds them (to_device rounds them so on the device).
    const auto device = [&](const std::vector<float>& v) { return to_device(*this, dt, v); };
    const auto held = [&](const std::vector<float>& v) { return dt == DType::F32 ? v : rounded_16(dt, v); };
    const auto both = [&](const std::vector<float>& ref, const std::vector<float>& got) {
      Tensor r = device(ref), g = device(got);
      const int64_t n = static_cast<int64_t>(ref.size());
      const double rms = ops::rms_cuda(ctx, dt, r.raw_data(), n);
      return std::make_pair(ops::disagreement(held(ref), held(got)),
                            ops::disagreement_cuda(ctx, dt, r.raw_data(), g.raw_data(), n, rms));
    };
    // Large enough for many blocks of the grid-stride loop, with a last partial block.
    const int64_t n = 3 * 4096 * 256 + 77;
    const auto ref = random_vector(n, 5);
    auto got = ref;
    for (size_t i = 0; i < got.size(); i += 997) got[i] *= 1.01f;
    got[got.size() - 1] += 0.5f;  // the worst element in the last block
    const auto [host, dev] = both(ref, got);
    INFO("host " << host << ", device " << dev);
    CHECK(host > 0.01);
    CHECK(dev == Approx(host).epsilon(1e-12));
    CHECK(both(ref, ref).second == 0);

    std::vector<float> small{1.f, -2.f, 0.5f, 0.f};
    auto with_nan = small, with_inf = small;
    with_nan[2] = nan;
    with_inf[1] = inf;
    CHECK(both(small, with_nan).second == std::numeric_limits<double>::infinity());
    CHECK(both(small, with_inf).second == std::numeric_limits<double>::infinity());
    CHECK(both({0.f, 0.f}, {0.f, 0.f}).second == 0);
    CHECK(both({0.f, 0.f}, {0.f, 1.f}).second == std::numeric_limits<double>::infinity());
    Tensor r = device(small);
    CHECK(ops::rms_cuda(ctx, dt, r.raw_data(), 4) == Approx(std::sqrt((1.0 + 4.0 + 0.25) / 4)).epsilon(1e-12));
    CHECK(ops::rms_cuda(ctx, dt, r.raw_data(), 0) == 0);
    CHECK(ops::disagreement_cuda(ctx, dt, r.raw_data(), r.raw_data(), 0, 0) == 0);
    CHECK(!std::isfinite(ops::rms_cuda(ctx, dt, device(with_inf).raw_data(), 4)));
    CHECK(!std::isfinite(ops::rms_cuda(ctx, dt, device(with_nan).raw_data(), 4)));
  }
}

// fastest_of times the GPU alone: a run whose host side is slow (3 ms of sleep
// before one tiny copy) beats one with real GPU work (a 1 GiB memset, about
// 0.3 ms on an H100), which it would lose were the host's time counted.
TEST_CASE_METHOD(GpuFixture, "the race's timing leaves out the host's cost of launching", "[conv]") {
  const size_t big = size_t{1} << 30;
  Tensor buffer = Tensor::zeros(Shape{static_cast<int64_t>(big)}, DType::U8, ctx.allocator());
  const cudaStream_t stream = ctx.raw_stream();
  const std::vector<std::function<void()>> runs{
      [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
        LS_CUDA_CHECK(cudaMemsetAsync(buffer.raw_data(), 1, 4096, stream));
      },
      [&] { LS_CUDA_CHECK(cudaMemsetAsync(buffer.raw_data(), 2, big, stream)); }};
  for (const auto& r : runs) r();  // first use before timing, as the race does
  std::vector<float> ms;
  bool gated = false;
  const size_t best = ops::fastest_of(runs, stream, /*reps=*/3, &ms, &gated);
  REQUIRE(ms.size() == 2);
  INFO("ms per run: " << ms[0] << " (host-slow), " << ms[1] << " (1 GiB memset)");
  CHECK(gated);
  CHECK(best == 0);
  CHECK(ms[0] < 0.1f);  // not the 3 ms the host spent
  CHECK(ms[1] > 0.05f);
  // A run that waits for the stream behind the gate: the gate times out, the
  // rest are timed without one, and nothing hangs.
  const std::vector<std::function<void()>> waiting{[&] { LS_CUDA_CHECK(cudaStreamSynchronize(stream)); },
                                                   [&] { LS_CUDA_CHECK(cudaMemsetAsync(buffer.raw_data(), 3, 4096,
                                                                                       stream)); }};
  (void)ops::fastest_of(waiting, stream, /*reps=*/1, &ms, &gated);
  CHECK_FALSE(gated);
  REQUIRE(ms.size() == 2);
}
