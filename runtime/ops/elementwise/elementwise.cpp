// Dispatch for ops/elementwise/elementwise.h: the CPU kernels for fp32 host
// tensors, the CUDA kernels (any float type) for GPU tensors.
#include "ops/elementwise/elementwise.h"

#include "core/error.h"
#include "ops/elementwise/elementwise_cpu.h"
#include "ops/memory/memory.h"

#ifdef LOCKSTEP_HAVE_CUDA
#include "cuda/context.h"
#include "ops/elementwise/elementwise_cuda.h"
#endif

namespace lockstep::ops {
namespace {

#ifdef LOCKSTEP_HAVE_CUDA
cudaStream_t stream(const Exec& ex) { return gpu_context(ex).raw_stream(); }
#endif

}  // namespace

void relu_forward(const Tensor& x, Tensor& y, const Exec& ex) {
  require_same(x, y, ex);
  if (on_gpu(x, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    relu_forward_cuda(x.dtype(), x.numel(), x.raw_data(), y.raw_data(), stream(ex));
#endif
    return;
  }
  relu_forward_cpu(x.numel(), x.data<float>(), y.data<float>());
}

void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx, const Exec& ex) {
  require_same(y, dy, ex);
  require_same(y, dx, ex);
  if (on_gpu(y, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    relu_backward_cuda(y.dtype(), y.numel(), y.raw_data(), dy.raw_data(), dx.raw_data(), stream(ex));
#endif
    return;
  }
  relu_backward_cpu(y.numel(), y.data<float>(), dy.data<float>(), dx.data<float>());
}

void add_relu(const Tensor& a, const Tensor& b, Tensor& y, const Exec& ex) {
  require_same(a, b, ex);
  require_same(a, y, ex);
  if (on_gpu(y, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    add_relu_cuda(y.dtype(), y.numel(), a.raw_data(), b.raw_data(), y.raw_data(), stream(ex));
#endif
    return;
  }
  add_relu_cpu(y.numel(), a.data<float>(), b.data<float>(), y.data<float>());
}

void add_inplace(const Tensor& x, Tensor& y, const Exec& ex) {
  require_same(x, y, ex);
  if (on_gpu(y, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    add_inplace_cuda(y.dtype(), y.numel(), x.raw_data(), y.raw_data(), stream(ex));
#endif
    return;
  }
  add_inplace_cpu(y.numel(), x.data<float>(), y.data<float>());
}

void gelu_forward(const Tensor& x, Tensor& y, const Exec& ex) {
  require_same(x, y, ex);
  if (on_gpu(x, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    gelu_forward_cuda(x.dtype(), x.numel(), x.raw_data(), y.raw_data(), stream(ex));
#endif
    return;
  }
  gelu_forward_cpu(x.numel(), x.data<float>(), y.data<float>());
}

void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx, const Exec& ex) {
  require_same(x, dy, ex);
  require_same(x, dx, ex);
  if (on_gpu(x, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    gelu_backward_cuda(x.dtype(), x.numel(), x.raw_data(), dy.raw_data(), dx.raw_data(), stream(ex));
#endif
    return;
  }
  gelu_backward_cpu(x.numel(), x.data<float>(), dy.data<float>(), dx.data<float>());
}

void dropout_forward(const Tensor& x, Tensor& y, Tensor& mask, float p, const DropoutDraw& d, const Exec& ex) {
  require_same(x, y, ex);
  LS_CHECK(mask.numel() >= x.numel() && mask.dtype() == DType::U8 && mask.device() == x.device(),
           "{}: dropout mask of {} {} for {} elements", ex.who, dtype_name(mask.dtype()), mask.shape().str(),
           x.numel());
  LS_CHECK(d.rows * d.row_len == x.numel(), "{}: dropout rows {} x {} for {} elements", ex.who, d.rows, d.row_len,
           x.numel());
  if (on_gpu(x, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    dropout_forward_cuda(x.dtype(), d.rows, d.row_len, d.row0, d.key, p, x.raw_data(), y.raw_data(),
                         mask.data<uint8_t>(), stream(ex), d.device_key, d.channels_last);
#endif
    return;
  }
  dropout_forward_cpu(d.rows, d.row_len, d.row0, d.key, p, x.data<float>(), y.data<float>(), mask.data<uint8_t>(),
                      d.channels_last);
}

void dropout_backward(const Tensor& mask, float p, const Tensor& dy, Tensor& dx, const Exec& ex) {
  require_same(dy, dx, ex);
  if (on_gpu(dy, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    dropout_backward_cuda(dy.dtype(), dy.numel(), p, mask.data<uint8_t>(), dy.raw_data(), dx.raw_data(), stream(ex));
#endif
    return;
  }
  dropout_backward_cpu(dy.numel(), p, mask.data<uint8_t>(), dy.data<float>(), dx.data<float>());
}

void cast(const Tensor& src, Tensor& dst, const Exec& ex) {
  LS_CHECK(src.numel() == dst.numel() && src.device() == dst.device() && src.device().is_cuda() &&
               ((src.dtype() == DType::F32 && is_16bit_float(dst.dtype())) ||
                (is_16bit_float(src.dtype()) && dst.dtype() == DType::F32)),
           "{}: cast of {} {} on {} into {} {} on {} (fp32 <-> bf16/fp16 on a GPU only)", ex.who,
           dtype_name(src.dtype()), src.shape().str(), src.device().str(), dtype_name(dst.dtype()),
           dst.shape().str(), dst.device().str());
#ifdef LOCKSTEP_HAVE_CUDA
  if (src.dtype() == DType::F32)
    to_16bit_cuda(src.numel(), dst.dtype(), src.data<float>(), dst.raw_data(), stream(ex));
  else
    from_16bit_cuda(src.numel(), src.dtype(), src.raw_data(), dst.data<float>(), stream(ex));
#else
  LS_THROW("{}: tensors on {} need a build with CUDA support", ex.who, src.device().str());
#endif
}

const Tensor& round_weight(const Tensor& w, DType dt, Tensor& w16, const Exec& ex) {
  ensure_scratch(w16, w.numel(), dt, w.device(), ex);
  Tensor view = w16.slice(0, Shape{w.numel()});
  cast(w, view, ex);
  return w16;
}

}  // namespace lockstep::ops
