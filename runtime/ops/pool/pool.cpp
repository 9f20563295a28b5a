// Dispatch for ops/pool/pool.h.
#include "ops/pool/pool.h"

#include "core/error.h"
#include "ops/memory/memory.h"

#ifdef LOCKSTEP_HAVE_CUDA
#include "cuda/context.h"
#include "ops/pool/pool2d_cuda.h"
#endif

namespace lockstep::ops {

void maxpool2d_forward(const Pool2dShape& s, const Tensor& x, Tensor& y, Tensor& argmax, const Exec& ex) {
  if (on_gpu(x, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    maxpool2d_forward_cuda(x.dtype(), s, x.raw_data(), y.raw_data(), argmax.data<int32_t>(),
                           gpu_context(ex).raw_stream());
#endif
    return;
  }
  maxpool2d_forward_cpu(s, x.data<float>(), y.data<float>(), argmax.data<int32_t>());
}

void maxpool2d_backward(const Pool2dShape& s, const Tensor& dy, const Tensor& argmax, Tensor& dx, const Exec& ex) {
  if (on_gpu(dy, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    maxpool2d_backward_cuda(dy.dtype(), s, dy.raw_data(), argmax.data<int32_t>(), dx.raw_data(),
                            gpu_context(ex).raw_stream());
#endif
    return;
  }
  maxpool2d_backward_cpu(s, dy.data<float>(), argmax.data<int32_t>(), dx.data<float>());
}

void avgpool2d_forward(const Pool2dShape& s, const Tensor& x, Tensor& y, const Exec& ex) {
  if (on_gpu(x, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    avgpool2d_forward_cuda(x.dtype(), s, x.raw_data(), y.raw_data(), gpu_context(ex).raw_stream());
#endif
    return;
  }
  avgpool2d_forward_cpu(s, x.data<float>(), y.data<float>());
}

void avgpool2d_backward(const Pool2dShape& s, const Tensor& dy, Tensor& dx, const Exec& ex) {
  if (on_gpu(dy, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    avgpool2d_backward_cuda(dy.dtype(), s, dy.raw_data(), dx.raw_data(), gpu_context(ex).raw_stream());
#endif
    return;
  }
  avgpool2d_backward_cpu(s, dy.data<float>(), dx.data<float>());
}

void global_avgpool_forward(const GlobalPoolShape& s, const Tensor& x, Tensor& y, const Exec& ex) {
  const bool nhwc = s.layout == Layout::NHWC;
  if (on_gpu(x, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    const cudaStream_t st = gpu_context(ex).raw_stream();
    if (nhwc)
      global_avgpool_nhwc_forward_cuda(x.dtype(), s.n, s.c, s.hw, x.raw_data(), y.raw_data(), st);
    else
      global_avgpool_forward_cuda(x.dtype(), s.n * s.c, s.hw, x.raw_data(), y.raw_data(), st);
#endif
    return;
  }
  if (nhwc)
    global_avgpool_nhwc_forward_cpu(s.n, s.c, s.hw, x.data<float>(), y.data<float>());
  else
    global_avgpool_forward_cpu(s.n * s.c, s.hw, x.data<float>(), y.data<float>());
}

void global_avgpool_backward(const GlobalPoolShape& s, const Tensor& dy, Tensor& dx, const Exec& ex) {
  const bool nhwc = s.layout == Layout::NHWC;
  if (on_gpu(dy, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    const cudaStream_t st = gpu_context(ex).raw_stream();
    if (nhwc)
      global_avgpool_nhwc_backward_cuda(dy.dtype(), s.n, s.c, s.hw, dy.raw_data(), dx.raw_data(), st);
    else
      global_avgpool_backward_cuda(dy.dtype(), s.n * s.c, s.hw, dy.raw_data(), dx.raw_data(), st);
#endif
    return;
  }
  if (nhwc)
    global_avgpool_nhwc_backward_cpu(s.n, s.c, s.hw, dy.data<float>(), dx.data<float>());
  else
    global_avgpool_backward_cpu(s.n * s.c, s.hw, dy.data<float>(), dx.data<float>());
}

}  // namespace lockstep::ops
