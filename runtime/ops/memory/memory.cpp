// Dispatch for ops/memory/memory.h: host memory directly, GPU memory through
// the context (its allocator and stream).
#include "ops/memory/memory.h"

#include <cstring>

#ifdef LOCKSTEP_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda/check.h"
#include "cuda/context.h"
#endif

namespace lockstep::ops {
namespace {

[[noreturn]] void no_cuda(const Exec& ex, Device device) {
  LS_THROW("{}: tensors on {} need a build with CUDA support", ex.who, device.str());
}

}  // namespace

cuda::Context& gpu_context(const Exec& ex) {
  LS_CHECK(ex.gpu != nullptr, "{}: tensors are on a GPU but the forward/backward context has no device context",
           ex.who);
  return *ex.gpu;
}

void require_cpu_kernel(const Tensor& t, const char* op, const Exec& ex) {
  if (t.device().is_cuda())
    LS_THROW("{}: {} has no CUDA kernel yet (tensors on {}); it runs on the CPU only", ex.who, op, t.device().str());
  on_gpu(t, ex);
}

bool on_gpu(const Tensor& t, const Exec& ex) {
  if (t.device().is_cuda()) {
#ifdef LOCKSTEP_HAVE_CUDA
    return true;
#else
    no_cuda(ex, t.device());
#endif
  }
  LS_CHECK(t.dtype() == DType::F32, "{}: {} tensors on the CPU (the CPU ops are fp32)", ex.who,
           dtype_name(t.dtype()));
  return false;
}

void require_same(const Tensor& a, const Tensor& b, const Exec& ex) {
  LS_CHECK(a.numel() == b.numel() && a.dtype() == b.dtype() && a.device() == b.device(),
           "{}: {} {} on {} with {} {} on {}", ex.who, dtype_name(a.dtype()), a.shape().str(), a.device().str(),
           dtype_name(b.dtype()), b.shape().str(), b.device().str());
}

std::shared_ptr<Allocator> allocator_for(Device device, const Exec& ex) {
  if (device.is_cpu()) return cpu_allocator();
#ifdef LOCKSTEP_HAVE_CUDA
  return gpu_context(ex).allocator();
#else
  no_cuda(ex, device);
#endif
}

std::shared_ptr<Allocator> device_allocator(const Exec& ex) {
#ifdef LOCKSTEP_HAVE_CUDA
  return gpu_context(ex).allocator();
#else
  LS_THROW("{}: device memory needs a build with CUDA support", ex.who);
#endif
}

Tensor& ensure_scratch(Tensor& t, int64_t numel, DType dtype, Device device, const Exec& ex) {
  if (!t.defined() || t.numel() < numel || t.dtype() != dtype || t.device() != device)
    t = Tensor::zeros(Shape{numel}, dtype, allocator_for(device, ex));
  return t;
}

void copy_same_device(Tensor& dst, const Tensor& src, const Exec& ex) {
  LS_CHECK(dst.numel() == src.numel() && dst.dtype() == src.dtype() && dst.device() == src.device(),
           "{}: copy of {} {} on {} into {} {} on {}", ex.who, dtype_name(src.dtype()), src.shape().str(),
           src.device().str(), dtype_name(dst.dtype()), dst.shape().str(), dst.device().str());
  if (dst.raw_data() == src.raw_data() || dst.nbytes() == 0) return;
  if (dst.device().is_cpu()) {
    std::memmove(dst.raw_data(), src.raw_data(), dst.nbytes());
    return;
  }
#ifdef LOCKSTEP_HAVE_CUDA
  LS_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), dst.nbytes(), cudaMemcpyDeviceToDevice,
                                gpu_context(ex).raw_stream()));
#else
  no_cuda(ex, dst.device());
#endif
}

void copy_to_host(void* host, const void* src, size_t bytes, Device device, const Exec& ex) {
  if (bytes == 0) return;
  if (device.is_cpu()) {
    std::memcpy(host, src, bytes);
    return;
  }
#ifdef LOCKSTEP_HAVE_CUDA
  const cudaStream_t st = gpu_context(ex).raw_stream();
  LS_CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, st));
  LS_CUDA_CHECK(cudaStreamSynchronize(st));
#else
  no_cuda(ex, device);
#endif
}

void copy_from_host(void* dst, const void* host, size_t bytes, Device device, const Exec& ex) {
  if (bytes == 0) return;
  if (device.is_cpu()) {
    std::memcpy(dst, host, bytes);
    return;
  }
#ifdef LOCKSTEP_HAVE_CUDA
  const cudaStream_t st = gpu_context(ex).raw_stream();
  LS_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, st));
  LS_CUDA_CHECK(cudaStreamSynchronize(st));  // the host buffer may be reused on return
#else
  no_cuda(ex, device);
#endif
}

}  // namespace lockstep::ops
