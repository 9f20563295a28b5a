// SharedScratch: per-depth gradient buffers and shared per-thread buffers.
#include "nn/shared_scratch.h"

#include "core/error.h"
#include "nn/device_util.h"

namespace lockstep {

void SharedScratch::reserve(int depth, Slot slot, int64_t numel, DType dtype, Device device, cuda::Context* gpu) {
  LS_CHECK(depth >= 0 && slot >= 0 && slot < kSlots, "SharedScratch: depth {} slot {}", depth, static_cast<int>(slot));
  const size_t i = static_cast<size_t>(depth) * kSlots + static_cast<size_t>(slot);
  if (bufs_.size() <= i) bufs_.resize(i + 1);
  ensure_scratch(bufs_[i], numel, dtype, device, gpu, "SharedScratch");
}

const Tensor& SharedScratch::buffer(int depth, Slot slot) const {
  const size_t i = static_cast<size_t>(depth) * kSlots + static_cast<size_t>(slot);
  LS_CHECK(depth >= 0 && i < bufs_.size() && bufs_[i].defined(), "SharedScratch: depth {} slot {} was never reserved",
           depth, static_cast<int>(slot));
  return bufs_[i];
}

void SharedScratch::fill(float value) {
  for (Tensor& t : bufs_)
    if (t.defined()) {
      LS_CHECK(t.device().is_cpu() && t.dtype() == DType::F32, "SharedScratch::fill: {} buffer on {}",
               dtype_name(t.dtype()), t.device().str());
      t.fill(value);
    }
  ws_.fill_thread_buffers(value);
}

HeldMemory SharedScratch::held_memory() const {
  HeldMemory h;
  for (const Tensor& t : bufs_) h.activation_gradients += static_cast<int64_t>(t.nbytes());
  h.scratch = ws_.thread_bytes() + ws_.shared_bytes();
  return h;
}

}  // namespace lockstep
