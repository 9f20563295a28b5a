// SharedScratch: the memory a model's layers use only while one of them runs,
// held once per model instead of once per layer: the CPU convolutions'
// per-thread buffers (ops::Workspace). Forward and backward run one layer at
// a time, so one set serves every convolution.
//
// (Activations and their gradients are the model's ActivationArena's:
// nn/activation_arena.h.) The model's outermost Sequential creates one and
// hands it down as it plans its memory (Module::share_scratch).
#pragma once

#include <cstdint>

#include "nn/module.h"
#include "ops/workspace.h"

namespace lockstep {

class SharedScratch {
 public:
  // The per-thread buffers the CPU convolutions share.
  const ops::Workspace& workspace() const { return ws_; }
  // Sets every element of the per-thread buffers (tests: NaN there shows a
  // layer that reads what another layer left).
  void fill(float value) { ws_.fill_thread_buffers(value); }
  // Bytes held: the per-thread buffers (scratch).
  HeldMemory held_memory() const;

 private:
  ops::Workspace ws_;
};

}  // namespace lockstep
