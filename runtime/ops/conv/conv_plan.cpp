// ConvPlan: one convolution direction through cuDNN's graph API (see the
// header for why and for the rules a candidate must pass).
#include "ops/conv/conv_plan.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/host_gate.h"
#include "cuda/stream.h"
#include "ops/disagreement/disagreement_cuda.h"
#include "tensor/allocator.h"

namespace lockstep::ops {

namespace {

// One backend descriptor, destroyed with the object.
class Backend {
 public:
  explicit Backend(cudnnBackendDescriptorType_t type) { LS_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_)); }
  ~Backend() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Backend(Backend&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  Backend& operator=(Backend&& o) noexcept {
    if (this != &o) {
      if (d_) cudnnBackendDestroyDescriptor(d_);
      d_ = std::exchange(o.d_, nullptr);
    }
    return *this;
  }
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  cudnnBackendDescriptor_t release() { return std::exchange(d_, nullptr); }
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* values) {
    LS_CUDNN_CHECK(cudnnBackendSetAttribute(d_, name, type, count, values));
  }
  void set_desc(cudnnBackendAttributeName_t name, const Backend& other) {
    cudnnBackendDescriptor_t o = other.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o);
  }
  void finalize() { LS_CUDNN_CHECK(cudnnBackendFinalize(d_)); }
  // Finalizes; false where cuDNN does not support what was set (nothing thrown).
  bool try_finalize() { return cudnnBackendFinalize(d_) == CUDNN_STATUS_SUCCESS; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// The handle attributes of a graph and a plan are marked deprecated in
// cuDNN 9 (a device-properties descriptor may stand in) but still honoured.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
constexpr cudnnBackendAttributeName_t kGraphHandle = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
constexpr cudnnBackendAttributeName_t kPlanHandle = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

// The three tensors: input-shaped (x or dx), filter-shaped (w or dw) and
// output-shaped (y or dy), whichever direction reads or writes them.
constexpr int64_t kUidX = 'x', kUidW = 'w', kUidY = 'y';
constexpr int64_t kAlignment = 16;  // bytes: the caching allocator's blocks are 256-aligned

// A 4-d tensor [d0, d1, d2, d3] (logical NCHW order), channels-last strides
// when `nhwc`, packed NCHW otherwise.
Backend tensor(int64_t uid, cudnnDataType_t type, std::array<int64_t, 4> d, bool nhwc) {
  const std::array<int64_t, 4> strides =
      nhwc ? std::array<int64_t, 4>{d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]}
           : std::array<int64_t, 4>{d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
  Backend t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, d.data());
  t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &kAlignment);
  t.finalize();
  return t;
}

template <typename Note>
std::vector<Note> notes(cudnnBackendDescriptor_t engine, cudnnBackendAttributeName_t name,
                        cudnnBackendAttributeType_t type) {
  std::vector<Note> out(16);
  int64_t count = 0;
  if (cudnnBackendGetAttribute(engine, name, type, static_cast<int64_t>(out.size()), &count, out.data()) !=
      CUDNN_STATUS_SUCCESS)
    count = 0;
  out.resize(static_cast<size_t>(std::clamp<int64_t>(count, 0, static_cast<int64_t>(out.size()))));
  return out;
}

template <typename T>
bool has(const std::vector<T>& v, T x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The operation descriptor of a direction and the attribute names of its
// input-shaped, filter-shaped and output-shaped tensors, convolution, alpha, beta.
struct OpAttrs {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
};
OpAttrs op_attrs(ConvDirection dir) {
  switch (dir) {
    case ConvDirection::Forward:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
    case ConvDirection::BackwardData:
      return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
    case ConvDirection::BackwardFilter: break;
  }
  return {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
}

}  // namespace

const char* direction_name(ConvDirection d) {
  switch (d) {
    case ConvDirection::Forward: return "forward";
    case ConvDirection::BackwardData: return "backward data";
    case ConvDirection::BackwardFilter: break;
  }
  return "backward filter";
}

struct ConvPlan::Descriptors {
  Backend x{CUDNN_BACKEND_TENSOR_DESCRIPTOR}, w{CUDNN_BACKEND_TENSOR_DESCRIPTOR}, y{CUDNN_BACKEND_TENSOR_DESCRIPTOR};
  Backend conv{CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR};
  Backend op;
  Backend graph{CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR};
  explicit Descriptors(cudnnBackendDescriptorType_t op_type) : op(op_type) {}
};

std::vector<ConvPlan> ConvPlan::candidates(cudnnHandle_t handle, ConvDirection dir, cudnnDataType_t type,
                                           const ConvPlanShape& s, bool deterministic, size_t workspace_limit,
                                           size_t max_candidates) {
  LS_REQUIRE(s.n > 0 && s.c > 0 && s.oc > 0 && s.h > 0 && s.w > 0 && s.kh > 0 && s.kw > 0 && s.oh > 0 && s.ow > 0 &&
                 s.stride > 0 && s.pad >= 0,
             std::string("convolution ") + direction_name(dir) + " plan: invalid shape");
  const OpAttrs attrs = op_attrs(dir);
  auto d = std::make_shared<Descriptors>(attrs.type);
  d->x = tensor(kUidX, type, {s.n, s.c, s.h, s.w}, s.nhwc);
  d->w = tensor(kUidW, type, {s.oc, s.c, s.kh, s.kw}, s.nhwc);
  d->y = tensor(kUidY, type, {s.n, s.oc, s.oh, s.ow}, s.nhwc);

  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2;
  const std::array<int64_t, 2> dilation{1, 1}, stride{s.stride, s.stride}, pad{s.pad, s.pad};
  d->conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  d->conv.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  d->conv.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
  d->conv.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation.data());
  d->conv.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride.data());
  d->conv.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad.data());
  d->conv.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad.data());
  d->conv.finalize();

  const float alpha = 1.f, beta = 0.f;  // fp32: the compute type's scalars
  d->op.set_desc(attrs.x, d->x);
  d->op.set_desc(attrs.w, d->w);
  d->op.set_desc(attrs.y, d->y);
  d->op.set_desc(attrs.conv, d->conv);
  d->op.set(attrs.alpha, CUDNN_TYPE_FLOAT, 1, &alpha);
  d->op.set(attrs.beta, CUDNN_TYPE_FLOAT, 1, &beta);
  // A convolution the graph API cannot express or has no engine for gives no
  // candidates (the caller keeps its legacy algorithm), not an error.
  if (!d->op.try_finalize()) return {};

  d->graph.set_desc(CUDNN_ATTR_OPERATIONGRAPH_OPS, d->op);
  d->graph.set(kGraphHandle, CUDNN_TYPE_HANDLE, 1, &handle);
  if (!d->graph.try_finalize()) return {};

  // The heuristics' list of engine configurations, best first.
  Backend heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t heur_mode = CUDNN_HEUR_MODE_A;
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, d->graph);
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &heur_mode);
  if (!heur.try_finalize()) return {};
  int64_t count = 0;
  LS_CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                          &count, nullptr));
  std::vector<Backend> configs;
  for (int64_t i = 0; i < count; ++i) configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const Backend& c : configs) raw.push_back(c.get());
  int64_t got = 0;
  LS_CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                          count, &got, raw.data()));

  std::vector<ConvPlan> out;
  for (int64_t i = 0; i < std::min(got, count) && out.size() < max_candidates; ++i) {
    Backend engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    cudnnBackendDescriptor_t e = engine.get();
    int64_t one = 0;
    if (cudnnBackendGetAttribute(configs[static_cast<size_t>(i)].get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &one, &e) != CUDNN_STATUS_SUCCESS)
      continue;
    const auto numerical = notes<cudnnBackendNumericalNote_t>(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                                              CUDNN_TYPE_NUMERICAL_NOTE);
    const auto behavior = notes<cudnnBackendBehaviorNote_t>(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
                                                            CUDNN_TYPE_BEHAVIOR_NOTE);
    const bool nondeterministic = has(numerical, CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC);
    if (has(behavior, CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) ||
        has(numerical, CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) || (deterministic && nondeterministic))
      continue;
    if (type == CUDNN_DATA_FLOAT && (has(numerical, CUDNN_NUMERICAL_NOTE_TENSOR_CORE) ||
                                     has(numerical, CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)))
      continue;
    int64_t global_index = -1;
    cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &one, &global_index);

    Backend plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    cudnnBackendDescriptor_t cfg = configs[static_cast<size_t>(i)].get();
    plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
    plan.set(kPlanHandle, CUDNN_TYPE_HANDLE, 1, &handle);
    if (cudnnBackendFinalize(plan.get()) != CUDNN_STATUS_SUCCESS) continue;  // not supported for this shape
    int64_t ws = 0;
    LS_CUDNN_CHECK(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                                            1, &one, &ws));
    if (ws < 0 || static_cast<uint64_t>(ws) > workspace_limit) continue;

    ConvPlan p;
    p.dir_ = dir;
    p.graph_ = d;
    p.plan_ = std::shared_ptr<void>(plan.release(), [](void* q) {
      cudnnBackendDestroyDescriptor(static_cast<cudnnBackendDescriptor_t>(q));
    });
    p.pack_ = std::make_shared<Pack>();
    p.workspace_bytes_ = static_cast<size_t>(ws);
    p.engine_ = global_index;
    p.deterministic_ = !nondeterministic;
    out.push_back(std::move(p));
  }
  return out;
}

struct ConvPlan::Pack {
  std::array<void*, 4> addresses{};  // x, w, y, workspace
  Backend pack{CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR};
  bool ready = false;
};

void ConvPlan::run(cudnnHandle_t handle, const void* in0, const void* in1, void* out, void* workspace) const {
  LS_CUDNN_CHECK(try_run(handle, in0, in1, out, workspace));
}

cudnnStatus_t ConvPlan::try_run(cudnnHandle_t handle, const void* in0, const void* in1, void* out,
                                void* workspace) const {
  // The run's pointers by tensor: x, w, y (one of them the output), then the workspace.
  std::array<void*, 4> addresses{};
  switch (dir_) {
    case ConvDirection::Forward: addresses = {const_cast<void*>(in0), const_cast<void*>(in1), out, workspace}; break;
    case ConvDirection::BackwardData:
      addresses = {out, const_cast<void*>(in0), const_cast<void*>(in1), workspace};
      break;
    case ConvDirection::BackwardFilter:
      addresses = {const_cast<void*>(in0), out, const_cast<void*>(in1), workspace};
      break;
  }
  if (!pack_->ready || pack_->addresses != addresses) {
    Pack fresh;
    const std::array<int64_t, 3> uids{kUidX, kUidW, kUidY};
    fresh.pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids.data());
    fresh.pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, addresses.data());
    fresh.pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &addresses[3]);
    fresh.pack.finalize();
    fresh.addresses = addresses;
    fresh.ready = true;
    *pack_ = std::move(fresh);
  }
  return cudnnBackendExecute(handle, static_cast<cudnnBackendDescriptor_t>(plan_.get()), pack_->pack.get());
}

namespace {

// A time or a disagreement for a race report: 3 significant digits.
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

RaceOutcome race_plans(cuda::Context& ctx, std::vector<ConvPlan> plans, DType dt, double bound, int64_t count,
                       size_t prefix, size_t legacy_bytes, const std::string& what, const RaceCalls& calls,
                       const RaceReference* reference) {
  const cuda::ConvReport& report = ctx.conv_report();
  RaceOutcome outcome;
  if (plans.empty()) {
    outcome.decided = true;
    if (report) report(what + "; no graph-API plan passes the rules");
    return outcome;
  }
  size_t bytes = std::max(legacy_bytes, reference ? reference->bytes : size_t{0});
  for (const ConvPlan& p : plans) bytes = std::max(bytes, p.workspace_bytes());
  // The block grows for the largest contender; once decided it goes back to
  // what the kept contender needs (or its size before the race). The context
  // holds its workspace for the whole run: a contender that lost must not
  // hold its scratch in every later step.
  const size_t before = ctx.workspace_bytes();
  const auto trim = [&](size_t kept_bytes) { ctx.trim_workspace(std::max(before, prefix + kept_bytes)); };
  char* block = static_cast<char*>(ctx.workspace(prefix + bytes));
  void* const out = calls.setup(block);
  void* const ws = block + prefix;
  const bool referenced = reference && reference->run(out, ws);
  if (!referenced) {
    (void)cudaGetLastError();  // a launch error cuDNN reported is not left for the next check
    calls.legacy(out, ws);
  }
  const double rms = rms_cuda(ctx, dt, out, count);
  if (!std::isfinite(rms)) {
    if (report) report(what + " gave an inf or NaN; the next call races again");
    trim(legacy_bytes);
    return outcome;
  }
  outcome.decided = true;

  // The contenders' output buffer. Without the memory for it (a model that
  // only just fits) the legacy algorithm is kept: the race is an optimisation.
  std::optional<Storage> got_block;
  try {
    got_block.emplace(ctx.allocator(), static_cast<size_t>(count) * size_of(dt));
  } catch (const Error& e) {
    if (report) report(what + "; no memory to race the plans (" + e.what() + ")");
    trim(legacy_bytes);
    return outcome;
  }
  void* const got = got_block->data();
  // runs[0] is the legacy call, timed whether admitted or not (the report
  // gives its time); runs[j + 1] is plans[entered[j]].
  std::vector<std::function<void()>> runs{[&] { calls.legacy(got, ws); }};
  std::string left_out = reference && !referenced ? "; the reference did not run (the legacy output is)" : "";
  bool legacy_admitted = true;
  if (referenced) {
    calls.legacy(got, ws);
    const double d = disagreement_cuda(ctx, dt, out, got, count, rms);
    if (d > bound) {
      legacy_admitted = false;
      left_out += "; the legacy algorithm left out (disagreement " + number(d) + ")";
    }
  }
  std::vector<size_t> entered;
  for (size_t i = 0; i < plans.size(); ++i) {
    const cudnnStatus_t status = calls.run(plans[i], got, ws);
    if (status != CUDNN_STATUS_SUCCESS) {
      (void)cudaGetLastError();
      left_out += "; engine " + std::to_string(plans[i].engine()) + " left out (did not run: " +
                  cudnnGetErrorString(status) + ")";
      continue;
    }
    const double d = disagreement_cuda(ctx, dt, out, got, count, rms);
    if (d > bound) {
      left_out += "; engine " + std::to_string(plans[i].engine()) + " left out (disagreement " + number(d) + ")";
      continue;
    }
    entered.push_back(i);
    runs.push_back([&, i] { LS_CUDNN_CHECK(calls.run(plans[i], got, ws)); });
  }
  std::vector<float> ms;
  bool gated = true;
  if (runs.size() > 1) (void)fastest_of(runs, ctx.raw_stream(), /*reps=*/3, &ms, &gated);
  if (!gated) left_out += "; timed with the host's launch cost (a run waited for the stream)";
  // The fastest admitted contender (0: the legacy call, also when none is admitted).
  size_t best = 0;
  for (size_t j = 1; j < ms.size(); ++j)
    if ((best == 0 && !legacy_admitted) || ms[j] < ms[best]) best = j;
  if (report) {
    std::string line = what + (ms.empty() ? "" : " " + number(ms[0]) + " ms");
    for (size_t j = 0; j < entered.size(); ++j)
      line += "; engine " + std::to_string(plans[entered[j]].engine()) + " " + number(ms[j + 1]) + " ms";
    // The kept contender's time too: an engine can enter with several knob settings.
    line += left_out + "; kept " +
            (best > 0 ? "engine " + std::to_string(plans[entered[best - 1]].engine())
                      : std::string("the legacy algorithm")) +
            (ms.empty() || (best == 0 && !legacy_admitted) ? "" : " (" + number(ms[best]) + " ms)");
    report(line);
  }
  if (best > 0) outcome.winner = std::move(plans[entered[best - 1]]);
  got_block.reset();  // before the trim: the workspace's new block may reuse its memory
  trim(outcome.winner ? outcome.winner->workspace_bytes() : legacy_bytes);
  return outcome;
}

size_t fastest_of(const std::vector<std::function<void()>>& runs, cudaStream_t stream, int reps,
                  std::vector<float>* ms, bool* gated) {
  LS_REQUIRE(!runs.empty() && reps > 0, "fastest_of: nothing to time");
  cuda::Event start(true), end(true);
  // The GPU's time alone: each contender's runs are queued behind a closed
  // gate. A gate that timed out (a run waited for the stream) is not closed
  // again: the rest are timed as they come, host cost included.
  cuda::HostGate gate;
  bool use_gate = true;
  size_t best = 0;
  float best_ms = 0;
  if (ms) ms->clear();
  for (size_t i = 0; i < runs.size(); ++i) {
    if (use_gate) gate.close(stream, kGateTimeoutMs);
    LS_CUDA_CHECK(cudaEventRecord(start.get(), stream));
    for (int r = 0; r < reps; ++r) runs[i]();
    LS_CUDA_CHECK(cudaEventRecord(end.get(), stream));
    if (use_gate) gate.open();
    end.synchronize();
    if (use_gate && gate.timed_out()) use_gate = false;
    const float t = cuda::Event::elapsed_ms(start, end);
    if (ms) ms->push_back(t / static_cast<float>(reps));
    if (i == 0 || t < best_ms) {
      best = i;
      best_ms = t;
    }
  }
  if (gated) *gated = use_gate;
  return best;
}

}  // namespace lockstep::ops
