// A convolution's filter gradient through cuDNN's graph (backend) API: the
// candidate execution plans for one layer shape and batch size, in the order
// of cuDNN's heuristics, and the fastest of them by timing.
//
// Why not cudnnConvolutionBackwardFilter alone: that legacy call runs each of
// its few algorithms with one engine configuration. On an H100 (2026-11-24)
// convnet's 128 -> 128 5x5 layer at batch 1024, 28x28, bf16 NHWC, spent
// 5.9 ms a step in it -- 44% of the step -- while PyTorch, which picks among
// the graph API's engine configurations (their knobs include split-K: this
// gradient is 128 x 3200 outputs, each a sum over 800k products), ran the same
// kernel family for its three largest layers in 1.0 ms together.
//
// Shapes (logical, whatever the memory order):
//   x  [N, C, H, W]   dy [N, OC, OH, OW]   dw [OC, C, KH, KW]
// `nhwc`: x, dy channels-last and dw [OC, KH, KW, C] in memory; otherwise all
// packed NCHW. Element type `type` (16-bit or fp32) for all three;
// accumulation in fp32 (the convolution's compute type). dw is overwritten
// (alpha 1, beta 0).
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
#include <vector>

namespace lockstep::ops {

struct FilterGradShape {
  int64_t n = 0, c = 0, h = 0, w = 0, oc = 0, kh = 0, kw = 0, oh = 0, ow = 0, pad = 0, stride = 1;
  bool nhwc = false;
};

class ConvFilterPlan {
 public:
  // Up to `max_candidates` plans that pass the rules, heuristics' best first;
  // empty when none does (the caller keeps its legacy algorithm then).
  static std::vector<ConvFilterPlan> candidates(cudnnHandle_t handle, cudnnDataType_t type, const FilterGradShape& s,
                                                bool deterministic, size_t workspace_limit, size_t max_candidates);

  size_t workspace_bytes() const { return workspace_bytes_; }
  int64_t engine() const { return engine_; }  // cuDNN's global engine index
  bool deterministic() const { return deterministic_; }

  // dw = dL/dw for x and dy; `workspace` holds workspace_bytes().
  void run(cudnnHandle_t handle, const void* x, const void* dy, void* dw, void* workspace) const;

  struct Descriptors;  // the backend descriptors (conv_filter_plan.cpp)

 private:
  ConvFilterPlan() = default;
  std::shared_ptr<const Descriptors> graph_;  // tensors, operation and graph the plan was made from
  std::shared_ptr<void> plan_;                // the finalized execution plan (a backend descriptor)
  size_t workspace_bytes_ = 0;
  int64_t engine_ = -1;
  bool deterministic_ = true;
};

// n 16-bit values (bf16, or IEEE half) at device address `p` as floats on
// the host; synchronises `stream` first.
std::vector<float> download_16_as_float(const void* p, size_t n, bool bf16, cudaStream_t stream);

// The index of the fastest of `runs` (not empty; each queues work on
// `stream`): each runs `reps` times between two events; synchronises the
// stream. Each must have run once before (first-use costs stay out of the
// timing): Conv2dCuda's race has run every contender once already, for the
// reference gradient and the agreement check.
size_t fastest_of(const std::vector<std::function<void()>>& runs, cudaStream_t stream, int reps);

}  // namespace lockstep::ops
