// ActivationArena: one block of memory for a model's activations and, in
// backward, their gradients, which reuse the memory of activations whose
// backward is done.
//
// Layout (element offsets, planned for the largest batch seen):
//   [ act of layer 0 | what layer 0 nests | act 1 | nested 1 | ... | headroom ]
// The model's outermost chain places its layers' outputs in the order its
// forward runs them, each layer's output before the chains nested in it (a
// residual block's shortcut, then its branch: the order they run forward,
// the reverse of the order their backward runs). So when a chain's layer k
// runs backward, everything placed after layer k's nested region (its
// `boundary`) belongs to layers whose backward is done: it is dead, and
// gradients may go there.
//
// Gradients are taken and released as backward runs: each goes at the lowest
// offset at or above its boundary that overlaps no gradient still held (first
// fit). The requests are the same every step (sizes are the planned
// capacity's), so every gradient gets the same address every step, which
// CUDA graphs need. The headroom is what the gradients need above the
// activations. The owning chain finds it before committing a plan by
// rehearsing its backward's requests (Module::rehearse_backward: hold and
// release, no memory), so the block is allocated once, at its final size.
// Should a backward ask for more than was rehearsed (an input gradient the
// rehearsal did not assume), the gradient past the block gets memory of its
// own, and settle() grows the block after that backward.
//
// Compared with gradient buffers held apart for the whole run (two per chain
// depth and a shortcut's), this keeps about what PyTorch keeps: PyTorch frees
// each activation after its backward and its allocator gives that memory to
// the next gradients.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "nn/module.h"
#include "tensor/tensor.h"

namespace lockstep {

class ActivationArena {
 public:
  // Planning, by the owning chain and the chains nested in it in forward
  // order. begin_plan drops the previous plan (and any gradient still held).
  void begin_plan(DType dtype);
  // Offset of a new activation of `numel` elements, after everything placed so far.
  int64_t place(int64_t numel);
  // The end of everything placed so far (a chain's boundaries are taken here).
  int64_t mark() const { return act_end_; }
  // Makes the block hold the plan (and the headroom found so far) on `device`
  // in the planned type (`gpu`: the context of a GPU device). A new block
  // changes generation(): every chain remakes its views before its next forward.
  void commit(Device device, cuda::Context* gpu);
  const Tensor& storage() const { return storage_; }
  uint64_t generation() const { return generation_; }
  DType dtype() const { return dtype_; }

  // Backward: `numel` elements at or above `boundary`, held until
  // release(handle); returns the handle (the offset). hold() alone is the
  // rehearsal's; take() also gives the memory, and sets *handle.
  int64_t hold(int64_t numel, int64_t boundary);
  Tensor take(int64_t numel, int64_t boundary, int64_t* handle);
  void release(int64_t handle);
  // Forgets every gradient held (the owner, at each forward: a backward that
  // threw part-way leaves nothing behind).
  void release_all();
  // After a whole backward: grows the block when a gradient did not fit.
  void settle();
  // Tests: fill every gradient taken from now on with `value` (host fp32),
  // so a layer that reads a gradient before writing it shows.
  void poison(std::optional<float> value) { poison_ = value; }

  int64_t activation_elements() const { return act_end_; }
  int64_t capacity_elements() const { return storage_.numel(); }
  int64_t gradient_top() const { return grad_top_; }  // highest gradient end of the plan so far
  // The headroom above the activations (activation_gradients) and memory a
  // gradient got outside the block, while held.
  HeldMemory held_memory() const;

 private:
  int64_t align(int64_t n) const { return (n + align_ - 1) / align_ * align_; }
  void grow();  // a new block when the plan or the headroom outgrew this one

  DType dtype_ = DType::F32;
  int64_t align_ = 64;  // elements: 256 bytes
  int64_t act_end_ = 0;
  int64_t grad_top_ = 0;
  Tensor storage_;
  uint64_t generation_ = 0;
  std::shared_ptr<Allocator> alloc_;  // the block's device's (a GPU's caching allocator)
  std::map<int64_t, int64_t> held_;       // offset -> numel of every gradient held
  std::map<int64_t, Tensor> overflow_;    // offset -> memory of its own, for those past the block
  std::optional<float> poison_;
};

}  // namespace lockstep
