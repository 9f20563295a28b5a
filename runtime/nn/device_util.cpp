// Device plumbing for layers: allocators, scratch, stream-ordered copies.
#include "nn/device_util.h"

#include <cstring>

#ifdef LOCKSTEP_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda/check.h"
#include "cuda/context.h"
#endif

namespace lockstep {

cuda::Context& gpu_context(cuda::Context* gpu, const char* who) {
  LS_CHECK(gpu != nullptr, "{}: tensors are on a GPU but the forward/backward context has no device context", who);
  return *gpu;
}

std::shared_ptr<Allocator> allocator_for(Device device, cuda::Context* gpu, const char* who) {
  if (device.is_cpu()) return cpu_allocator();
#ifdef LOCKSTEP_HAVE_CUDA
  return gpu_context(gpu, who).allocator();
#else
  LS_THROW("{}: tensors on {} need a build with CUDA support", who, device.str());
#endif
}

Tensor& ensure_scratch(Tensor& t, int64_t numel, DType dtype, Device device, cuda::Context* gpu, const char* who) {
  if (!t.defined() || t.numel() < numel || t.dtype() != dtype || t.device() != device)
    t = Tensor::zeros(Shape{numel}, dtype, allocator_for(device, gpu, who));
  return t;
}

void copy_same_device(Tensor& dst, const Tensor& src, cuda::Context* gpu, const char* who) {
  LS_CHECK(dst.numel() == src.numel() && dst.dtype() == src.dtype() && dst.device() == src.device(),
           "{}: copy of {} {} on {} into {} {} on {}", who, dtype_name(src.dtype()), src.shape().str(),
           src.device().str(), dtype_name(dst.dtype()), dst.shape().str(), dst.device().str());
  if (dst.raw_data() == src.raw_data() || dst.nbytes() == 0) return;
  if (dst.device().is_cpu()) {
    std::memmove(dst.raw_data(), src.raw_data(), dst.nbytes());
    return;
  }
#ifdef LOCKSTEP_HAVE_CUDA
  LS_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), dst.nbytes(), cudaMemcpyDeviceToDevice,
                                gpu_context(gpu, who).raw_stream()));
#else
  LS_THROW("{}: tensors on {} need a build with CUDA support", who, dst.device().str());
#endif
}

}  // namespace lockstep
