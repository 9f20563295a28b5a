// SharedScratch: the memory a model's layers use only while one of them runs,
// held once per model instead of once per layer or chain:
//   - each chain's (Sequential's) two ping-pong gradient buffers,
//   - a residual block's shortcut input gradient,
//   - the CPU convolutions' per-thread buffers (ops::Workspace).
//
// Why sharing is safe: forward and backward run one layer at a time. A chain
// at nesting depth d keeps dy and dx of its current layer in its depth-d
// buffers while that layer runs; a residual block in it runs its branch and
// then its shortcut, one after the other, in the depth-(d+1) buffers. Chains of
// one depth never run at the same time, so one set of buffers per depth serves
// all of them: resnet50's 16 branches and 4 shortcuts use two buffers where
// each used to hold its own two. A chain's buffers hold its gradients only
// during its backward; nothing in them survives from one chain to the next.
//
// Buffers grow (never shrink) when a chain plans a larger batch, on the device
// and in the element type asked for; growing frees the old memory, so nobody
// keeps a view of a buffer across calls: chains slice it where they use it.
// The model's outermost Sequential creates one and hands it down as it plans
// its memory (Module::share_scratch).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/module.h"
#include "ops/workspace.h"
#include "tensor/tensor.h"

namespace lockstep {

namespace cuda {
class Context;  // cuda/context.h
}

class SharedScratch {
 public:
  // Buffers of one depth: the chain's two gradient buffers, then the residual
  // blocks' shortcut input gradient.
  enum Slot { kGradA = 0, kGradB = 1, kShortcutGrad = 2, kSlots = 3 };

  // Makes (depth, slot) hold at least `numel` elements of `dtype` on `device`
  // (a new zero-filled buffer when it does not: nn/device_util.h ensure_scratch;
  // `gpu` is the context of a GPU device).
  void reserve(int depth, Slot slot, int64_t numel, DType dtype, Device device, cuda::Context* gpu);
  // The whole buffer (callers slice the part they need). Throws if never reserved.
  const Tensor& buffer(int depth, Slot slot) const;
  // The per-thread buffers the CPU convolutions share.
  const ops::Workspace& workspace() const { return ws_; }
  // Sets every element of every buffer (host fp32 buffers; tests: NaN there
  // shows a layer that reads what another layer left).
  void fill(float value);
  // Bytes held: the gradient buffers (activation_gradients) and the CPU
  // convolutions' per-thread buffers (scratch).
  HeldMemory held_memory() const;

 private:
  std::vector<Tensor> bufs_;  // [depth * kSlots + slot]
  ops::Workspace ws_;
};

}  // namespace lockstep
