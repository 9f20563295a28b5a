// Dispatch for ops/layout/layout.h.
#include "ops/layout/layout.h"

#include "ops/layout/layout_cpu.h"
#include "ops/memory/memory.h"

#ifdef LOCKSTEP_HAVE_CUDA
#include "cuda/context.h"
#include "ops/layout/layout_cuda.h"
#endif

namespace lockstep::ops {

void reorder_layout(const Tensor& src, Layout from, Layout to, Tensor& dst, const Exec& ex) {
  LS_CHECK(src.rank() == 4, "{}: layout change of a rank-{} tensor {} (needs [N, C, H, W])", ex.who, src.rank(),
           src.shape().str());
  if (from == to) {
    copy_same_device(dst, src, ex);
    return;
  }
  LS_CHECK(dst.numel() == src.numel() && dst.dtype() == src.dtype() && dst.device() == src.device(),
           "{}: layout change of {} {} on {} into {} {} on {}", ex.who, dtype_name(src.dtype()), src.shape().str(),
           src.device().str(), dtype_name(dst.dtype()), dst.shape().str(), dst.device().str());
  const int64_t n = src.size(0), c = src.size(1), hw = src.size(2) * src.size(3);
  if (src.device().is_cpu()) {
    if (to == Layout::NHWC)
      nchw_to_nhwc_cpu(n, c, hw, src.data<float>(), dst.data<float>());
    else
      nhwc_to_nchw_cpu(n, c, hw, src.data<float>(), dst.data<float>());
    return;
  }
#ifdef LOCKSTEP_HAVE_CUDA
  const cudaStream_t st = gpu_context(ex).raw_stream();
  if (to == Layout::NHWC)
    nchw_to_nhwc_cuda(src.dtype(), n, c, hw, src.raw_data(), dst.raw_data(), st);
  else
    nhwc_to_nchw_cuda(src.dtype(), n, c, hw, src.raw_data(), dst.raw_data(), st);
#else
  LS_THROW("{}: tensors on {} need a build with CUDA support", ex.who, src.device().str());
#endif
}

}  // namespace lockstep::ops
