// One convolution direction through cuDNN's graph (backend) API: the
// candidate execution plans for one layer shape and batch size, in the order
// of cuDNN's heuristics, and the timed race that admits them and the legacy
// algorithm by agreement with an accurate reference and keeps the fastest
// (race_plans).
//
// Why not the legacy cudnnConvolution{Forward,BackwardData,BackwardFilter}
// calls alone: each of their few algorithms runs with one engine
// configuration. On an H100 (2026-11-24) convnet's 128 -> 128 5x5 layer at
// batch 1024, 28x28, bf16 NHWC, spent 5.9 ms a step in the legacy filter
// gradient -- 44% of the step -- while PyTorch, which picks among the graph
// API's engine configurations (their knobs include split-K: this gradient is
// 128 x 3200 outputs, each a sum over 800k products), ran the same kernel
// family for its three largest layers in 1.0 ms together. PyTorch takes its
// forward and backward-data kernels from the same lists.
//
// Directions, shapes logical (whatever the memory order), in the legacy
// calls' argument order:
//   Forward        x [N, C, H, W], w [OC, C, KH, KW]   -> y  [N, OC, OH, OW]
//   BackwardData   w,              dy [N, OC, OH, OW]  -> dx [N, C, H, W]
//   BackwardFilter x,              dy                  -> dw [OC, C, KH, KW]
// `nhwc`: the activations channels-last and the filter [OC, KH, KW, C] in
// memory; otherwise all packed NCHW. Element type `type` (16-bit or fp32) for
// all three; accumulation in fp32 (the convolution's compute type). The
// output is overwritten (alpha 1, beta 0).
//
// Rules for a candidate: it finalizes; it needs no runtime compilation (NVRTC
// would cost seconds per shape); it does not reduce in reduced precision; with
// `deterministic`, it is not marked non-deterministic (cuDNN's numerical note:
// atomics); its workspace fits `workspace_limit`; fp32 (`type` FLOAT) also
// rules out tensor-core engines (TF32 would round inputs to 10 bits).
//
// All handles are RAII; plans share the graph they came from. Calls run on the
// stream the handle is bound to.
#pragma once

#include <cudnn.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "tensor/dtype.h"

namespace lockstep::ops {

enum class ConvDirection { Forward, BackwardData, BackwardFilter };
const char* direction_name(ConvDirection d);

struct ConvPlanShape {
  int64_t n = 0, c = 0, h = 0, w = 0, oc = 0, kh = 0, kw = 0, oh = 0, ow = 0, pad = 0, stride = 1;
  bool nhwc = false;
};

class ConvPlan {
 public:
  // Up to `max_candidates` plans for direction `dir` that pass the rules,
  // heuristics' best first; empty when none does or the graph API cannot
  // express the convolution (the caller keeps its legacy algorithm then).
  static std::vector<ConvPlan> candidates(cudnnHandle_t handle, ConvDirection dir, cudnnDataType_t type,
                                          const ConvPlanShape& s, bool deterministic, size_t workspace_limit,
                                          size_t max_candidates);

  size_t workspace_bytes() const { return workspace_bytes_; }
  int64_t engine() const { return engine_; }  // cuDNN's global engine index
  bool deterministic() const { return deterministic_; }

  ConvDirection direction() const { return dir_; }

  // The direction's output from its two inputs, in the table's order above:
  // Forward (x, w) -> y, BackwardData (w, dy) -> dx, BackwardFilter (x, dy) ->
  // dw; `workspace` holds workspace_bytes(). The variant pack (the pointers
  // cuDNN is given) is built once per new set of addresses and reused while
  // they repeat, as a training step's persistent buffers do: no descriptor
  // is made per call in the steady state.
  void run(cudnnHandle_t handle, const void* in0, const void* in1, void* out, void* workspace) const;
  // The same, returning cuDNN's status instead of throwing on a failure (a
  // race tries each plan once this way: a plan that finalized but does not
  // run is left out, not fatal).
  cudnnStatus_t try_run(cudnnHandle_t handle, const void* in0, const void* in1, void* out, void* workspace) const;

  struct Descriptors;  // the backend descriptors (conv_plan.cpp)
  struct Pack;         // the last variant pack and its addresses (conv_plan.cpp)

 private:
  ConvPlan() = default;
  ConvDirection dir_ = ConvDirection::Forward;
  std::shared_ptr<const Descriptors> graph_;  // tensors, operation and graph the plan was made from
  std::shared_ptr<void> plan_;                // the finalized execution plan (a backend descriptor)
  std::shared_ptr<Pack> pack_;                // run()'s cache (copies of a plan share it; one stream uses them)
  size_t workspace_bytes_ = 0;
  int64_t engine_ = -1;
  bool deterministic_ = true;
};

// A timed race between the legacy algorithm of one convolution direction and
// `plans` (Conv2dCuda's, under --cudnn-benchmark), on the call's own inputs.
// Each plan is run once into a second buffer of `count` elements of `dt` (from
// the context's caching allocator, held for the race only) and admitted only
// if it runs and its output agrees with the legacy one -- the reference --
// within `bound` (ops/disagreement/disagreement.h, measured on the device with
// ops/disagreement/disagreement_cuda.h): some engines round partial sums in a 16-bit type,
// and a wrong engine is never kept. The legacy algorithm and the admitted
// plans are then timed (fastest_of, 3 runs each). The workspace block is
// sized for every contender, `prefix` bytes first for the caller (an NHWC
// weight, a weight-gradient scratch), and trimmed afterwards to the prefix
// plus the kept contender's scratch, or to its size before the race if larger
// (cuda::Context::trim_workspace; the caller asks for its block again):
struct RaceCalls {
  // Fills the caller's prefix of the block and returns where the reference
  // output goes: the call's own output (y, dx) or the prefix scratch, which
  // the caller's real call overwrites afterwards.
  std::function<void*(char* block)> setup;
  std::function<void(void* out, void* workspace)> legacy;                          // the legacy call
  std::function<cudnnStatus_t(const ConvPlan&, void* out, void* workspace)> run;  // ConvPlan::try_run
};
// An accurate algorithm (ops/conv/conv_reference.h): `run` writes the direction's
// output into out, false when it did not run; it needs `bytes` of scratch.
struct RaceReference {
  std::function<bool(void* out, void* workspace)> run;
  size_t bytes = 0;
};
struct RaceOutcome {
  bool decided = false;            // false: the reference had an inf or NaN (an fp16 loss scale too high)
  std::optional<ConvPlan> winner;  // decided: the plan kept, or none (the legacy algorithm)
};
// With `reference`, every contender, the legacy call included, is measured
// against its output; without it (or when it does not run), against the
// legacy output. The fastest admitted contender wins; when none is admitted
// (a legacy algorithm off the reference, and no plan agreeing), the legacy
// algorithm is kept. No plans, or no memory for the second buffer: decided,
// the legacy algorithm kept. `what` names the layer and direction in the
// line each race sends to ctx.conv_report() (contenders and ms per run,
// contenders left out and why, the one kept). Synchronises ctx's stream.
RaceOutcome race_plans(cuda::Context& ctx, std::vector<ConvPlan> plans, DType dt, double bound, int64_t count,
                       size_t prefix, size_t legacy_bytes, const std::string& what, const RaceCalls& calls,
                       const RaceReference* reference = nullptr);

// The index of the fastest of `runs` (not empty; each queues work on
// `stream`): each runs `reps` times between two events, queued behind a
// closed cuda::HostGate so that the events time the GPU alone, not the host's
// cost of launching the calls; synchronises the stream. Each must have run
// once before (first-use costs stay out of the timing): Conv2dCuda's race has
// run every contender once already, for the reference output and the
// agreement check. `ms`, when given, receives each run's milliseconds per
// repetition, in the order of `runs`; `gated`, false when a run waited for
// the stream behind the gate (its timeout, kGateTimeoutMs, let it pass) and
// the rest were timed without one.
constexpr double kGateTimeoutMs = 20.0;
size_t fastest_of(const std::vector<std::function<void()>>& runs, cudaStream_t stream, int reps,
                  std::vector<float>* ms = nullptr, bool* gated = nullptr);

}  // namespace lockstep::ops
