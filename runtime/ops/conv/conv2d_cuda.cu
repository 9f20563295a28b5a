// Conv2d through cuDNN's convolution API: descriptors per layer shape and batch
// size, algorithm choice by heuristics or by timing (deterministic; fp32 FMA
// math, or bf16/fp16 on tensor cores), the NHWC weight reorder, and the calls
// into the own kernels of ops/conv/conv2d_epilogue_cuda.h (bias + ReLU epilogue,
// ReLU mask, bias gradient, dw widened into fp32).
#include "ops/conv/conv2d_cuda.h"

#include <cudnn.h>

#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/throw.h"
#include "cuda/check.h"
#include "ops/conv/conv2d_epilogue_cuda.h"
#include "ops/conv/conv_legacy_choice.h"
#include "ops/conv/conv_plan.h"
#include "ops/conv/conv_reference.h"
#include "ops/disagreement/disagreement.h"
#include "ops/layout/layout_cuda.h"

namespace lockstep::ops {
namespace {

using legacy_choice::choose_one;
using legacy_choice::Rules;

std::string describe(int64_t n, int64_t oc, const ConvGeometry& g) {
  return "conv2d (cuda) [" + std::to_string(n) + ", " + std::to_string(g.c) + ", " + std::to_string(g.h) + ", " +
         std::to_string(g.w) + "] -> [" + std::to_string(oc) + ", " + std::to_string(g.oh) + ", " +
         std::to_string(g.ow) + "], kernel " + std::to_string(g.kh) + "x" + std::to_string(g.kw) + " stride " +
         std::to_string(g.stride) + " pad " + std::to_string(g.pad);
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

cudnnDataType_t cudnn_type(ConvData d) {
  switch (d) {
    case ConvData::BF16: return CUDNN_DATA_BFLOAT16;
    case ConvData::F16: return CUDNN_DATA_HALF;
    case ConvData::F32: break;
  }
  return CUDNN_DATA_FLOAT;
}
bool is_16bit(ConvData d) { return d != ConvData::F32; }
DType dtype_16(ConvData d) { return d == ConvData::BF16 ? DType::BF16 : DType::F16; }
const char* data_name(ConvData d) { return d == ConvData::BF16 ? "bf16" : d == ConvData::F16 ? "fp16" : "fp32"; }

}  // namespace

namespace {

// Empty batch: the parameter gradients are zero (or unchanged).
void zero_param_grads(cuda::Context& ctx, int64_t weights, int64_t oc, float* dw, float* db, bool accumulate) {
  if (accumulate) return;
  LS_CUDA_CHECK(cudaMemsetAsync(dw, 0, static_cast<size_t>(weights) * sizeof(float), ctx.raw_stream()));
  if (db) LS_CUDA_CHECK(cudaMemsetAsync(db, 0, static_cast<size_t>(oc) * sizeof(float), ctx.raw_stream()));
}

// The cuDNN calls that list and size one direction's legacy algorithms.
// operands() puts the descriptors in the order the direction's calls take
// them: forward (x, w, conv, y), backward data (w, y, conv, x), backward
// filter (x, y, conv, w).
enum class LegacyDirection { Forward, BackwardData, BackwardFilter };

template <LegacyDirection D, typename PerfT, auto MaxCount, auto Find, auto Heuristic, auto Workspace>
struct LegacyCalls {
  using Perf = PerfT;
  static constexpr auto max_count = MaxCount;
  static constexpr auto find = Find;
  static constexpr auto heuristic = Heuristic;
  static constexpr auto workspace = Workspace;
  static constexpr const char* name() {
    return D == LegacyDirection::Forward ? "forward" : D == LegacyDirection::BackwardData ? "backward-data"
                                                                                          : "backward-filter";
  }
  static auto operands(cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                       cudnnTensorDescriptor_t y) {
    if constexpr (D == LegacyDirection::Forward)
      return std::make_tuple(x, w, conv, y);
    else if constexpr (D == LegacyDirection::BackwardData)
      return std::make_tuple(w, y, conv, x);
    else
      return std::make_tuple(x, y, conv, w);
  }
};

using ForwardCalls =
    LegacyCalls<LegacyDirection::Forward, cudnnConvolutionFwdAlgoPerf_t, &cudnnGetConvolutionForwardAlgorithmMaxCount,
                &cudnnFindConvolutionForwardAlgorithm, &cudnnGetConvolutionForwardAlgorithm_v7,
                &cudnnGetConvolutionForwardWorkspaceSize>;
using BackwardDataCalls = LegacyCalls<LegacyDirection::BackwardData, cudnnConvolutionBwdDataAlgoPerf_t,
                                      &cudnnGetConvolutionBackwardDataAlgorithmMaxCount,
                                      &cudnnFindConvolutionBackwardDataAlgorithm,
                                      &cudnnGetConvolutionBackwardDataAlgorithm_v7,
                                      &cudnnGetConvolutionBackwardDataWorkspaceSize>;
using BackwardFilterCalls = LegacyCalls<LegacyDirection::BackwardFilter, cudnnConvolutionBwdFilterAlgoPerf_t,
                                        &cudnnGetConvolutionBackwardFilterAlgorithmMaxCount,
                                        &cudnnFindConvolutionBackwardFilterAlgorithm,
                                        &cudnnGetConvolutionBackwardFilterAlgorithm_v7,
                                        &cudnnGetConvolutionBackwardFilterWorkspaceSize>;

constexpr size_t kAlign = 256;  // cuDNN workspace alignment within a carved block
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

struct Conv2dCuda::Impl {
  int64_t oc = 0;
  ConvGeometry g{};
  ConvData data = ConvData::F32;
  Layout layout = Layout::NCHW;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int64_t n = -1;  // the batch size the tensor descriptors and algorithms are for (-1: none yet)
  cudnnConvolutionFwdAlgo_t fwd_algo{};
  cudnnConvolutionBwdDataAlgo_t data_algo{};
  cudnnConvolutionBwdFilterAlgo_t filter_algo{};
  // 16-bit: the math type each chosen algorithm came with, set on the descriptor
  // before each call (fp32 keeps CUDNN_FMA_MATH throughout).
  cudnnMathType_t fwd_math = CUDNN_TENSOR_OP_MATH, data_math = CUDNN_TENSOR_OP_MATH,
                  filter_math = CUDNN_TENSOR_OP_MATH;
  Algorithms algos;
  // What was chosen for each batch size seen (a short last batch alternates
  // with the full one; a benchmark search runs once per size).
  struct Choice {
    cudnnConvolutionFwdAlgo_t fwd_algo{};
    cudnnConvolutionBwdDataAlgo_t data_algo{};
    cudnnConvolutionBwdFilterAlgo_t filter_algo{};
    cudnnMathType_t fwd_math = CUDNN_TENSOR_OP_MATH, data_math = CUDNN_TENSOR_OP_MATH,
                    filter_math = CUDNN_TENSOR_OP_MATH;
    Algorithms algos;
    bool provisional = false;  // heuristics standing in for a search inside a capture: not cached
  };
  std::map<int64_t, Choice> chosen_for;
  // Under ConvSearch::Benchmark: per direction (ConvDirection's order) and
  // batch size, the graph-API plan that beat the legacy algorithm in the timed
  // race (nullopt: the legacy algorithm won, no plan passed the rules, or there
  // was no memory to race).
  std::array<std::map<int64_t, std::optional<ConvPlan>>, 3> plan_for;

  ~Impl() {
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
  }

  // The activations' element type: fp32, or the 16-bit type of a mixed-precision object.
  DType dtype() const { return is_16bit(data) ? dtype_16(data) : DType::F32; }

  // Either precision's forward, after the caller checked the precision (x, w, y of dtype()).
  void forward(cuda::Context& ctx, int64_t batch, const void* xp, const void* wp, const float* b, void* yp,
               bool relu) {
    LS_REQUIRE(batch >= 0, describe(batch) + ": negative batch size");
    if (batch == 0) return;
    prepare(ctx, batch);
    // NHWC: one workspace block, the weight reordered to [OC, KH, KW, C] first, then cuDNN's scratch.
    const size_t wbytes = weight_scratch_bytes(size_of(dtype()));
    const void* wk = wp;
    if (race_pending(ctx, ConvDirection::Forward))
      race(ctx, ConvDirection::Forward, batch * oc * g.oh * g.ow, wbytes, algos.forward_bytes,
           {[&](char* block) -> void* {
              wk = weight_for_cudnn(ctx, wp, block);
              return yp;
            },
            [&](void* out, void* ws) { legacy_forward(ctx, xp, wk, out, ws); },
            [&](const ConvPlan& p, void* out, void* ws) { return p.try_run(ctx.cudnn(), xp, wk, out, ws); }},
           xp, wk);
    const ConvPlan* fplan = plan(ConvDirection::Forward);
    char* block = static_cast<char*>(ctx.workspace(wbytes + (fplan ? fplan->workspace_bytes() : algos.forward_bytes)));
    void* ws = block + wbytes;
    wk = weight_for_cudnn(ctx, wp, block);
    if (fplan)
      fplan->run(ctx.cudnn(), xp, wk, yp, ws);
    else
      legacy_forward(ctx, xp, wk, yp, ws);
    conv_bias_relu_cuda(dtype(), layout, batch, oc, g.oh * g.ow, b, relu, yp, ctx.raw_stream());
  }

  // y = conv(x, w) by the legacy algorithm chosen for the prepared batch size
  // (wk: the weight as cuDNN's filter descriptor says; ws: its scratch).
  void legacy_forward(cuda::Context& ctx, const void* xp, const void* wk, void* yp, void* ws) const {
    const float one = 1.f, zero = 0.f;  // alpha and beta are fp32 for every non-double configuration
    if (is_16bit(data)) LS_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, fwd_math));
    LS_CUDNN_CHECK(cudnnConvolutionForward(ctx.cudnn(), &one, x, xp, w, wk, conv, fwd_algo, ws, algos.forward_bytes,
                                           &zero, y, yp));
  }

  // Either precision's backward, after the caller checked the precision (x, w,
  // y, dy, dx of dtype(); dw, db fp32). cuDNN writes the weight gradient in
  // dtype() and the filter descriptor's order into scratch at the start of the
  // workspace block (dws), and conv_weight_grad_cuda widens or reorders it into
  // dw -- except fp32 NCHW by the legacy algorithm, which writes dw itself
  // (cuDNN's beta adds with `accumulate`). dws's space then holds the NHWC
  // weight for dx (free again: the widening kernel ran before, in stream order).
  void backward(cuda::Context& ctx, int64_t batch, const void* xp, const void* wp, const void* yp, void* dyp,
                void* dxp, float* dw, float* db, bool accumulate, bool relu) {
    LS_REQUIRE(batch >= 0, describe(batch) + ": negative batch size");
    const int64_t weights = oc * g.k();
    if (batch == 0) {
      zero_param_grads(ctx, weights, oc, dw, db, accumulate);
      return;
    }
    prepare(ctx, batch);
    const DType dt = dtype();
    conv_mask_and_bias_grad_cuda(ctx, dt, layout, batch, oc, g.oh * g.ow, yp, dyp, db, accumulate, relu);
    const size_t dws_bytes = aligned(static_cast<size_t>(weights) * size_of(dt));
    if (race_pending(ctx, ConvDirection::BackwardFilter))
      race(ctx, ConvDirection::BackwardFilter, weights, dws_bytes, algos.backward_filter_bytes,
           {[&](char* block) -> void* { return block; },
            [&](void* out, void* ws) { legacy_filter_grad(ctx, xp, dyp, out, ws, algos.backward_filter_bytes); },
            [&](const ConvPlan& p, void* out, void* ws) { return p.try_run(ctx.cudnn(), xp, dyp, out, ws); }},
           xp, dyp);
    const void* wk = wp;
    if (dxp && race_pending(ctx, ConvDirection::BackwardData))
      race(ctx, ConvDirection::BackwardData, batch * g.c * g.h * g.w, dws_bytes, algos.backward_data_bytes,
           {[&](char* block) -> void* {
              wk = weight_for_cudnn(ctx, wp, block);
              return dxp;
            },
            [&](void* out, void* ws) { legacy_data_grad(ctx, wk, dyp, out, ws, algos.backward_data_bytes); },
            [&](const ConvPlan& p, void* out, void* ws) { return p.try_run(ctx.cudnn(), wk, dyp, out, ws); }},
           wk, dyp);

    const ConvPlan* fplan = plan(ConvDirection::BackwardFilter);
    const ConvPlan* dplan = dxp ? plan(ConvDirection::BackwardData) : nullptr;
    const bool direct = dt == DType::F32 && layout == Layout::NCHW && !fplan;  // cuDNN writes dw itself
    const size_t filter_bytes = fplan ? fplan->workspace_bytes() : algos.backward_filter_bytes;
    const size_t data_bytes = dplan ? dplan->workspace_bytes() : algos.backward_data_bytes;
    const size_t bytes = std::max(filter_bytes, dxp ? data_bytes : size_t{0});
    const size_t prefix = direct ? 0 : dws_bytes;  // NCHW needs no room for a reordered weight
    char* block = static_cast<char*>(ctx.workspace(prefix + bytes));
    void* ws = block + prefix;
    if (direct) {
      legacy_filter_grad(ctx, xp, dyp, dw, ws, bytes, /*add=*/accumulate);
    } else {
      if (fplan)
        fplan->run(ctx.cudnn(), xp, dyp, block, ws);
      else
        legacy_filter_grad(ctx, xp, dyp, block, ws, bytes);
      conv_weight_grad_cuda(dt, layout, oc, g.c, g.kh * g.kw, block, dw, accumulate, ctx.raw_stream());
    }
    if (!dxp) return;
    wk = weight_for_cudnn(ctx, wp, block);
    if (dplan)
      dplan->run(ctx.cudnn(), wk, dyp, dxp, ws);
    else
      legacy_data_grad(ctx, wk, dyp, dxp, ws, bytes);
  }

  // NHWC: bytes of a reordered weight (or its gradient) in elements of `elem`
  // bytes at the start of a workspace block; NCHW: none.
  size_t weight_scratch_bytes(size_t elem) const {
    return layout == Layout::NHWC ? aligned(static_cast<size_t>(oc * g.k()) * elem) : 0;
  }
  // The weight [OC, C, KH, KW] at `wp` reordered into [OC, KH, KW, C] at `dst`
  // (the filter format of an NHWC descriptor); returns dst. A 1x1 kernel's
  // two orders are the same bytes: wp itself (36 of resnet50's 53
  // convolutions, each reordered twice a step before).
  const void* weight_to_nhwc(cuda::Context& ctx, const void* wp, void* dst) const {
    if (g.kh * g.kw == 1) return wp;
    nchw_to_nhwc_cuda(dtype(), oc, g.c, g.kh * g.kw, wp, dst, ctx.raw_stream());
    return dst;
  }

  // The weight as the filter descriptor says: wp itself in NCHW, else
  // weight_to_nhwc() into `block`.
  const void* weight_for_cudnn(cuda::Context& ctx, const void* wp, void* block) const {
    return layout == Layout::NHWC ? weight_to_nhwc(ctx, wp, block) : wp;
  }

  std::string describe(int64_t batch) const { return ::lockstep::ops::describe(batch, oc, g); }

  // dw = dL/dw by the legacy algorithm chosen for the prepared batch size, in
  // the filter descriptor's type and order (`add`: added to dw, cuDNN's beta 1).
  void legacy_filter_grad(cuda::Context& ctx, const void* xp, const void* dyp, void* dw, void* ws, size_t ws_bytes,
                          bool add = false) const {
    const float one = 1.f, zero = 0.f;
    if (is_16bit(data)) LS_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, filter_math));
    LS_CUDNN_CHECK(cudnnConvolutionBackwardFilter(ctx.cudnn(), &one, x, xp, y, dyp, conv, filter_algo, ws, ws_bytes,
                                                  add ? &one : &zero, w, dw));
  }

  // dx = dL/dx by the legacy algorithm chosen for the prepared batch size.
  void legacy_data_grad(cuda::Context& ctx, const void* wk, const void* dyp, void* dxp, void* ws,
                        size_t ws_bytes) const {
    const float one = 1.f, zero = 0.f;
    if (is_16bit(data)) LS_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, data_math));
    LS_CUDNN_CHECK(cudnnConvolutionBackwardData(ctx.cudnn(), &one, w, wk, y, dyp, conv, data_algo, ws, ws_bytes,
                                                &zero, x, dxp));
  }

  // The decided plan of direction `dir` for the prepared batch size, or null (legacy algorithm).
  const ConvPlan* plan(ConvDirection dir) const {
    const auto& decided = plan_for[static_cast<size_t>(dir)];
    const auto it = decided.find(n);
    return it != decided.end() && it->second ? &*it->second : nullptr;
  }

  // Whether direction `dir` is still to be raced at the prepared batch size:
  // ConvSearch::Benchmark, not decided for this size, and outside a capture
  // (inside one the legacy algorithm runs until a call outside decides).
  bool race_pending(cuda::Context& ctx, ConvDirection dir) const {
    if (ctx.conv_policy().search != cuda::ConvSearch::Benchmark || plan_for[static_cast<size_t>(dir)].count(n))
      return false;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    LS_CUDA_CHECK(cudaStreamIsCapturing(ctx.raw_stream(), &capture));
    return capture == cudaStreamCaptureStatusNone;
  }

  // The race for direction `dir` at the prepared batch size, on this call's
  // inputs (race_plans, ops/conv/conv_plan.h): the graph API's engine
  // configurations (up to 8 that pass ConvPlan's rules under this policy)
  // and the legacy algorithm, each admitted by agreement (the 16-bit or the
  // fp32 bound) with an accurate reference algorithm (ops/conv/conv_reference.h;
  // the legacy output where cuDNN offers none). The outcome is kept for the
  // batch size (plan_for) unless the reference had an inf or NaN: the next
  // call races again.
  //   count: elements of the direction's output; prefix: bytes the caller
  //   keeps at the start of the workspace block (an NHWC weight, dws); calls:
  //   see RaceCalls; a, b: the direction's inputs, read when the reference
  //   runs (after calls.setup, which may set them). Synchronises the
  //   stream, as cudnnFind* does.
  void race(cuda::Context& ctx, ConvDirection dir, int64_t count, size_t prefix, size_t legacy_bytes,
            const RaceCalls& calls, const void* const& a, const void* const& b) {
    const cuda::ConvPolicy& policy = ctx.conv_policy();
    const ConvPlanShape shape{n, g.c, g.h, g.w, oc, g.kh, g.kw, g.oh, g.ow, g.pad, g.stride, layout == Layout::NHWC};
    std::vector<ConvPlan> plans = ConvPlan::candidates(ctx.cudnn(), dir, cudnn_type(data), shape,
                                                       policy.deterministic, policy.workspace_limit,
                                                       /*max_candidates=*/8);
    const double bound = is_16bit(data) ? disagreement_bound_16(data == ConvData::BF16) : disagreement_bound_f32();
    ConvDescriptors desc;
    desc.x = x;
    desc.y = y;
    desc.w = w;
    desc.conv = conv;
    const std::optional<ConvReference> ref =
        find_reference(ctx.cudnn(), desc, dir, is_16bit(data), policy.workspace_limit);
    const std::string what = describe(n) + ", " + data_name(data) + (layout == Layout::NHWC ? " nhwc, " : ", ") +
                             direction_name(dir) + ": " +
                             (ref ? "reference algorithm " + std::to_string(ref->algo) + ", " : std::string()) +
                             "legacy algorithm " + std::to_string(legacy_algorithm(dir));
    RaceReference reference;
    if (ref) {
      reference.bytes = ref->workspace_bytes;
      reference.run = [&](void* out, void* ws) {
        return run_reference(ctx.cudnn(), desc, *ref, is_16bit(data), a, b, out, ws) == CUDNN_STATUS_SUCCESS;
      };
    }
    RaceOutcome outcome = race_plans(ctx, std::move(plans), dtype(), bound, count, prefix, legacy_bytes, what, calls,
                                     ref ? &reference : nullptr);
    if (outcome.decided) plan_for[static_cast<size_t>(dir)].emplace(n, std::move(outcome.winner));
  }

  // The legacy algorithm chosen for direction `dir` (a cudnnConvolution*Algo_t).
  int legacy_algorithm(ConvDirection dir) const {
    switch (dir) {
      case ConvDirection::Forward: return static_cast<int>(fwd_algo);
      case ConvDirection::BackwardData: return static_cast<int>(data_algo);
      case ConvDirection::BackwardFilter: break;
    }
    return static_cast<int>(filter_algo);
  }

  // Descriptors and algorithms for batch size `batch` > 0.
  void prepare(cuda::Context& ctx, int64_t batch) {
    LS_REQUIRE(batch > 0, describe(batch) + ": batch size must be positive");
    if (batch == n) return;
    n = -1;  // until everything below has succeeded
    LS_REQUIRE(fits_int(batch) && fits_int(batch * g.c * g.h * g.w) && fits_int(batch * oc * g.oh * g.ow),
               describe(batch) + ": tensors must hold fewer than 2^31 elements");
    const cudnnDataType_t type = cudnn_type(data);
    const cudnnTensorFormat_t format = layout == Layout::NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    LS_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, format, type, static_cast<int>(batch),
                                              static_cast<int>(g.c), static_cast<int>(g.h), static_cast<int>(g.w)));
    LS_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, format, type, static_cast<int>(batch),
                                              static_cast<int>(oc), static_cast<int>(g.oh), static_cast<int>(g.ow)));
    int dn = 0, dc = 0, dh = 0, dw = 0;
    LS_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv, x, w, &dn, &dc, &dh, &dw));
    LS_REQUIRE(dn == batch && dc == oc && dh == g.oh && dw == g.ow,
               describe(batch) + ": cuDNN computes output [" + std::to_string(dn) + ", " + std::to_string(dc) +
                   ", " + std::to_string(dh) + ", " + std::to_string(dw) + "]");

    auto found = chosen_for.find(batch);
    Choice fresh;
    if (found == chosen_for.end()) {
      fresh = choose(ctx, batch);
      if (!fresh.provisional) found = chosen_for.emplace(batch, fresh).first;
    }
    const Choice& ch = found != chosen_for.end() ? found->second : fresh;
    fwd_algo = ch.fwd_algo;
    data_algo = ch.data_algo;
    filter_algo = ch.filter_algo;
    fwd_math = ch.fwd_math;
    data_math = ch.data_math;
    filter_math = ch.filter_math;
    algos = ch.algos;
    n = batch;
  }

  // One direction's legacy algorithm (conv_legacy_choice.h): cuDNN's timed
  // list when `find`, else (or when that yields nothing usable, setting
  // fell_back) its heuristic list, filtered by the rules; its workspace into
  // `bytes`. 16-bit sets each candidate's math type on the descriptor before
  // sizing it; math_for_list() runs before each list.
  template <typename Calls, typename MathForList>
  typename Calls::Perf choose_direction(cudnnHandle_t handle, bool find, const Rules& rules,
                                        const MathForList& math_for_list, int64_t batch, size_t& bytes,
                                        bool& fell_back) {
    using Perf = typename Calls::Perf;
    const auto descs = Calls::operands(x, w, conv, y);
    int max = 0;
    LS_CUDNN_CHECK(Calls::max_count(handle, &max));
    Perf p{};
    const bool ok = choose_one(
        max, find,
        [&](int req, int* got, Perf* perf) {
          math_for_list();
          return std::apply([&](auto... d) { return Calls::find(handle, d..., req, got, perf); }, descs);
        },
        [&](int req, int* got, Perf* perf) {
          math_for_list();
          return std::apply([&](auto... d) { return Calls::heuristic(handle, d..., req, got, perf); }, descs);
        },
        rules,
        [&](decltype(Perf{}.algo) a, cudnnMathType_t math, size_t* b) {
          if (is_16bit(data)) LS_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, math));
          return std::apply([&](auto... d) { return Calls::workspace(handle, d..., a, b); }, descs);
        },
        p, bytes, fell_back);
    LS_REQUIRE(ok, describe(batch) + ": cuDNN offers no usable " + Calls::name() + " algorithm");
    return p;
  }

  // The three algorithms for the descriptors as set for `batch`: from cuDNN's
  // heuristics, or (ConvSearch::Benchmark) from cudnnFind*, which runs every
  // candidate once and lists them fastest first; either list goes through
  // pick(). Finding synchronises the device and allocates its own scratch, so
  // inside a CUDA graph capture (a batch size first seen there) the heuristic
  // list is used instead and the choice is provisional (not cached: the next
  // call outside a capture searches). A failed search, or one whose list has
  // no usable entry, falls back to the heuristics too.
  Choice choose(cuda::Context& ctx, int64_t batch) {
    const cudnnHandle_t handle = ctx.cudnn();
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    LS_CUDA_CHECK(cudaStreamIsCapturing(ctx.raw_stream(), &capture));
    const cuda::ConvPolicy& policy = ctx.conv_policy();
    const bool benchmark = policy.search == cuda::ConvSearch::Benchmark;
    const bool find = benchmark && capture == cudaStreamCaptureStatusNone;
    // 16-bit under the default (deterministic) policy leaves the transforms
    // out: they round in the 16-bit type (conv_legacy_choice.h), and the
    // legacy algorithm runs wherever no raced plan wins. The any-algorithm
    // policy keeps them.
    const Rules rules{policy.workspace_limit, is_16bit(data), policy.deterministic,
                      !is_16bit(data) || !policy.deterministic};
    // Before each list: 16-bit offers tensor-op algorithms (pick() then sets
    // each candidate's own math type); fp32 keeps FMA math (no TF32).
    const auto math_for_list = [&] {
      LS_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, is_16bit(data) ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    };
    Choice ch;
    ch.provisional = benchmark && !find;
    Algorithms& chosen = ch.algos;
    bool fell_back = false;
    const auto fwd = choose_direction<ForwardCalls>(handle, find, rules, math_for_list, batch,
                                                    chosen.forward_bytes, fell_back);
    ch.fwd_algo = fwd.algo;
    ch.fwd_math = fwd.mathType;
    chosen.forward = static_cast<int>(fwd.algo);
    const auto bwd_data = choose_direction<BackwardDataCalls>(handle, find, rules, math_for_list, batch,
                                                              chosen.backward_data_bytes, fell_back);
    ch.data_algo = bwd_data.algo;
    ch.data_math = bwd_data.mathType;
    chosen.backward_data = static_cast<int>(bwd_data.algo);
    const auto bwd_filter = choose_direction<BackwardFilterCalls>(handle, find, rules, math_for_list, batch,
                                                                  chosen.backward_filter_bytes, fell_back);
    ch.filter_algo = bwd_filter.algo;
    ch.filter_math = bwd_filter.mathType;
    chosen.backward_filter = static_cast<int>(bwd_filter.algo);
    chosen.deterministic = chosen.deterministic && fwd.determinism == CUDNN_DETERMINISTIC &&
                           bwd_data.determinism == CUDNN_DETERMINISTIC &&
                           bwd_filter.determinism == CUDNN_DETERMINISTIC;
    math_for_list();  // fp32 relies on FMA math on the descriptor; 16-bit sets its type before each call
    chosen.benchmarked = find && !fell_back;
    return ch;
  }
};

Conv2dCuda::Conv2dCuda(int64_t oc, const ConvGeometry& g, ConvData data, Layout layout)
    : impl_(std::make_unique<Impl>()) {
  const std::string what = describe(0, oc, g);
  LS_REQUIRE(oc > 0 && g.c > 0 && g.h > 0 && g.w > 0 && g.kh > 0 && g.kw > 0 && g.stride > 0 && g.pad >= 0,
             what + ": invalid shape");
  LS_REQUIRE(fits_int(oc) && fits_int(g.c) && fits_int(g.h) && fits_int(g.w) && fits_int(g.kh) && fits_int(g.kw) &&
                 fits_int(g.stride) && fits_int(g.pad),
             what + ": dimensions must fit in int");
  LS_REQUIRE(g.oh == (g.h + 2 * g.pad - g.kh) / g.stride + 1 && g.ow == (g.w + 2 * g.pad - g.kw) / g.stride + 1 &&
                 g.oh > 0 && g.ow > 0,
             what + ": output size does not match the input, kernel, stride and padding");
  Impl& m = *impl_;
  m.oc = oc;
  m.g = g;
  m.data = data;
  m.layout = layout;
  // impl_ is complete: if a call below throws, its destructor frees what was made.
  LS_CUDNN_CHECK(cudnnCreateTensorDescriptor(&m.x));
  LS_CUDNN_CHECK(cudnnCreateTensorDescriptor(&m.y));
  LS_CUDNN_CHECK(cudnnCreateFilterDescriptor(&m.w));
  LS_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&m.conv));
  // NHWC: the filter in [OC, KH, KW, C] (the layer's weight reordered per call), as tensor-core kernels read it.
  LS_CUDNN_CHECK(cudnnSetFilter4dDescriptor(m.w, cudnn_type(data),
                                            layout == Layout::NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                            static_cast<int>(oc),
                                            static_cast<int>(g.c), static_cast<int>(g.kh), static_cast<int>(g.kw)));
  LS_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(m.conv, static_cast<int>(g.pad), static_cast<int>(g.pad),
                                                 static_cast<int>(g.stride), static_cast<int>(g.stride), 1, 1,
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  // fp32: FMA math, no TF32 (see the header); 16-bit: tensor cores, fp32 accumulation
  // (the convolution's compute type above).
  LS_CUDNN_CHECK(cudnnSetConvolutionMathType(m.conv, is_16bit(data) ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
}

ConvData Conv2dCuda::data() const { return impl_->data; }

Conv2dCuda::~Conv2dCuda() = default;
Conv2dCuda::Conv2dCuda(Conv2dCuda&&) noexcept = default;
Conv2dCuda& Conv2dCuda::operator=(Conv2dCuda&&) noexcept = default;

Conv2dCuda::Algorithms Conv2dCuda::algorithms(cuda::Context& ctx, int64_t n) {
  impl_->prepare(ctx, n);
  Algorithms a = impl_->algos;
  if (const ConvPlan* p = impl_->plan(ConvDirection::Forward)) {
    a.forward_engine = p->engine();
    a.forward_bytes = p->workspace_bytes();
    a.deterministic = a.deterministic && p->deterministic();
  }
  if (const ConvPlan* p = impl_->plan(ConvDirection::BackwardData)) {
    a.backward_data_engine = p->engine();
    a.backward_data_bytes = p->workspace_bytes();
    a.deterministic = a.deterministic && p->deterministic();
  }
  if (const ConvPlan* p = impl_->plan(ConvDirection::BackwardFilter)) {
    a.backward_filter_engine = p->engine();
    a.backward_filter_bytes = p->workspace_bytes();
    a.deterministic = a.deterministic && p->deterministic();
  }
  return a;
}


// x, w, y, dy, dx are of the object's data type (ConvData): fp32 or 16-bit.
void Conv2dCuda::forward(cuda::Context& ctx, int64_t n, const void* x, const void* w, const float* b, void* y,
                         bool relu) {
  impl_->forward(ctx, n, x, w, b, y, relu);
}

void Conv2dCuda::backward(cuda::Context& ctx, int64_t n, const void* x, const void* w, const void* y, void* dy,
                          void* dx, float* dw, float* db, bool accumulate, bool relu) {
  impl_->backward(ctx, n, x, w, y, dy, dx, dw, db, accumulate, relu);
}

}  // namespace lockstep::ops
