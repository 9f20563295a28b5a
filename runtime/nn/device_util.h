// Device plumbing the layers share: where scratch memory for a tensor's
// device comes from, stream-ordered copies, and the check that a GPU tensor
// arrived with a device context. CPU tensors never touch CUDA; without
// LOCKSTEP_HAVE_CUDA a GPU tensor cannot exist, and these say so if asked.
#pragma once

#include <memory>

#include "nn/module.h"
#include "tensor/tensor.h"

namespace lockstep {

// The allocator for memory on `device`: the host's, or the context's caching
// allocator (whose blocks are ordered on its stream).
std::shared_ptr<Allocator> allocator_for(Device device, cuda::Context* gpu, const char* who);

// `t` again when it holds at least `numel` elements of `dtype` on `device`,
// otherwise a new zero-filled tensor there (scratch that grows with the batch).
Tensor& ensure_scratch(Tensor& t, int64_t numel, DType dtype, Device device, cuda::Context* gpu, const char* who);

// dst = src (same numel and dtype, same device). On a GPU the copy is queued
// on the context's stream (asynchronous, ordered with the layers' kernels).
void copy_same_device(Tensor& dst, const Tensor& src, cuda::Context* gpu, const char* who);

// dst = src reordered from layout `from` to layout `to` (tensor/layout.h).
// src's shape is the logical [N, C, H, W]; dst has the same numel, dtype and
// device (any shape). On the CPU fp32 only; on a GPU fp32, bf16 or fp16,
// queued on the context's stream. from == to is a plain copy. src and dst
// must not overlap (unless from == to).
void reorder_layout(const Tensor& src, Layout from, Layout to, Tensor& dst, cuda::Context* gpu, const char* who);

// The context a GPU tensor's layer runs on; throws when the caller gave none.
cuda::Context& gpu_context(cuda::Context* gpu, const char* who);

}  // namespace lockstep
