// ActivationArena: forward-order placement and first-fit gradients.
#include "nn/activation_arena.h"

#include <algorithm>

#include "core/error.h"
#include "ops/memory/memory.h"

namespace lockstep {

void ActivationArena::begin_plan(DType dtype) {
  dtype_ = dtype;
  align_ = std::max<int64_t>(1, 256 / static_cast<int64_t>(size_of(dtype)));
  act_end_ = 0;
  grad_top_ = 0;
  held_.clear();
  overflow_.clear();
}

int64_t ActivationArena::place(int64_t numel) {
  LS_CHECK(numel >= 0, "ActivationArena::place({})", numel);
  const int64_t at = act_end_;
  act_end_ = align(at + numel);
  return at;
}

void ActivationArena::commit(Device device, cuda::Context* gpu) {
  LS_CHECK(held_.empty(), "ActivationArena::commit with {} gradients still held (an unbalanced rehearsal)",
           held_.size());
  alloc_ = ops::allocator_for(device, ops::Exec{gpu, "ActivationArena"});
  grow();
}

void ActivationArena::grow() {
  const int64_t need = std::max<int64_t>(std::max(act_end_, grad_top_), 1);
  if (storage_.defined() && storage_.numel() >= need && storage_.dtype() == dtype_ &&
      storage_.device() == alloc_->device())
    return;
  // The old block goes first: after a new plan the chains hold no views of it
  // (Sequential::place), so the two are never held together.
  storage_ = Tensor();
  storage_ = Tensor::zeros(Shape{need}, dtype_, alloc_);
  ++generation_;
}

int64_t ActivationArena::hold(int64_t numel, int64_t boundary) {
  LS_CHECK(numel > 0 && boundary >= 0, "ActivationArena::hold({}, {})", numel, boundary);
  // First fit: the lowest aligned offset at or above the boundary that
  // overlaps no held gradient. held_ is ordered by offset and its intervals
  // are disjoint, so one pass moves past every interval in the way.
  int64_t at = align(boundary);
  for (const auto& [off, n] : held_)
    if (off < at + numel && at < off + n) at = align(off + n);
  held_[at] = numel;
  grad_top_ = std::max(grad_top_, at + numel);
  return at;
}

Tensor ActivationArena::take(int64_t numel, int64_t boundary, int64_t* handle) {
  LS_CHECK(handle != nullptr && storage_.defined(), "ActivationArena::take before the plan was committed");
  const int64_t at = hold(numel, boundary);
  *handle = at;
  Tensor t;
  if (at + numel <= storage_.numel()) {
    t = storage_.slice(at, Shape{numel});
  } else {  // past the block (the first backward of a plan): memory of its own until settle()
    t = Tensor::zeros(Shape{numel}, dtype_, alloc_);
    overflow_[at] = t;
  }
  if (poison_) {
    LS_CHECK(t.device().is_cpu() && t.dtype() == DType::F32, "ActivationArena::poison: {} gradients on {}",
             dtype_name(t.dtype()), t.device().str());
    t.fill(*poison_);
  }
  return t;
}

void ActivationArena::release(int64_t handle) {
  LS_CHECK(held_.erase(handle) == 1, "ActivationArena::release({}): no gradient held there", handle);
  overflow_.erase(handle);
}

void ActivationArena::release_all() {
  held_.clear();
  overflow_.clear();
}

void ActivationArena::settle() {
  if (grad_top_ <= storage_.numel()) return;
  LS_CHECK(held_.empty(), "ActivationArena::settle with {} gradients still held", held_.size());
  grow();
}

HeldMemory ActivationArena::held_memory() const {
  HeldMemory h;
  const int64_t elem = static_cast<int64_t>(size_of(dtype_));
  h.activation_gradients = std::max<int64_t>(0, storage_.numel() - act_end_) * elem;
  for (const auto& [off, t] : overflow_) h.activation_gradients += static_cast<int64_t>(t.nbytes());
  return h;
}

}  // namespace lockstep
