// Device plumbing for layers: allocators, scratch, stream-ordered copies.
#include "nn/device_util.h"

#include <cstring>

#include "ops/layout.h"

#ifdef LOCKSTEP_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda/check.h"
#include "cuda/context.h"
#include "ops/layout_cuda.h"
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

void reorder_layout(const Tensor& src, Layout from, Layout to, Tensor& dst, cuda::Context* gpu, const char* who) {
  LS_CHECK(src.rank() == 4, "{}: layout change of a rank-{} tensor {} (needs [N, C, H, W])", who, src.rank(),
           src.shape().str());
  if (from == to) {
    copy_same_device(dst, src, gpu, who);
    return;
  }
  LS_CHECK(dst.numel() == src.numel() && dst.dtype() == src.dtype() && dst.device() == src.device(),
           "{}: layout change of {} {} on {} into {} {} on {}", who, dtype_name(src.dtype()), src.shape().str(),
           src.device().str(), dtype_name(dst.dtype()), dst.shape().str(), dst.device().str());
  const int64_t n = src.size(0), c = src.size(1), hw = src.size(2) * src.size(3);
  if (src.device().is_cpu()) {
    if (to == Layout::NHWC)
      ops::nchw_to_nhwc_cpu(n, c, hw, src.data<float>(), dst.data<float>());
    else
      ops::nhwc_to_nchw_cpu(n, c, hw, src.data<float>(), dst.data<float>());
    return;
  }
#ifdef LOCKSTEP_HAVE_CUDA
  const cudaStream_t st = gpu_context(gpu, who).raw_stream();
  if (to == Layout::NHWC)
    ops::nchw_to_nhwc_cuda(src.dtype(), n, c, hw, src.raw_data(), dst.raw_data(), st);
  else
    ops::nhwc_to_nchw_cuda(src.dtype(), n, c, hw, src.raw_data(), dst.raw_data(), st);
#else
  LS_THROW("{}: tensors on {} need a build with CUDA support", who, src.device().str());
#endif
}

}  // namespace lockstep
