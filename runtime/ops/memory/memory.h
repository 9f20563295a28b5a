// Device memory the layers and optimizers share, on whichever device a tensor
// is: where scratch comes from, stream-ordered copies, host <-> device copies,
// and the check that GPU work arrived with a device context. CPU tensors never
// touch CUDA; in a build without CUDA a GPU tensor cannot exist, and these say
// so if asked. The dispatch is memory.cpp.
#pragma once

#include <cstddef>
#include <memory>

#include "ops/exec.h"
#include "tensor/tensor.h"

namespace lockstep::ops {

// The context GPU work of `ex` runs on; throws when the caller gave none.
cuda::Context& gpu_context(const Exec& ex);

// For the dispatch files: true when `t` is on a GPU (throws in a build without
// CUDA); a CPU tensor must be fp32 (the CPU kernels' type).
bool on_gpu(const Tensor& t, const Exec& ex);
// For families with CPU kernels only: throws, naming `op` ("layer norm
// forward"), when `t` is on a GPU; otherwise on_gpu's check of a CPU tensor.
void require_cpu_kernel(const Tensor& t, const char* op, const Exec& ex);
// Throws unless a and b have the same numel, dtype and device.
void require_same(const Tensor& a, const Tensor& b, const Exec& ex);

// The allocator for memory on `device`: the host's, or the context's caching
// allocator (whose blocks are ordered on its stream).
std::shared_ptr<Allocator> allocator_for(Device device, const Exec& ex);

// The device context's caching allocator (throws without one, or in a build
// without CUDA).
std::shared_ptr<Allocator> device_allocator(const Exec& ex);

// `t` again when it holds at least `numel` elements of `dtype` on `device`,
// otherwise a new zero-filled tensor there (scratch that grows with the batch).
Tensor& ensure_scratch(Tensor& t, int64_t numel, DType dtype, Device device, const Exec& ex);

// dst = src (same numel and dtype, same device). On a GPU the copy is queued
// on the context's stream (asynchronous, ordered with the layers' kernels).
void copy_same_device(Tensor& dst, const Tensor& src, const Exec& ex);

// `bytes` bytes between host memory and memory on `device` (a plain copy when
// that is the CPU). On a GPU both are ordered on the context's stream after
// the work queued so far, and both wait for the copy: the host buffer is
// filled, or free to reuse, on return.
void copy_to_host(void* host, const void* src, size_t bytes, Device device, const Exec& ex);
void copy_from_host(void* dst, const void* host, size_t bytes, Device device, const Exec& ex);

}  // namespace lockstep::ops
