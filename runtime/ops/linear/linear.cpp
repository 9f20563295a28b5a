// Dispatch for ops/linear/linear.h.
#include "ops/linear/linear.h"

#include "core/error.h"
#include "ops/elementwise/elementwise.h"
#include "ops/linear/linear_cpu.h"
#include "ops/memory/memory.h"

#ifdef LOCKSTEP_HAVE_CUDA
#include "cuda/context.h"
#include "ops/linear/linear_cuda.h"
#endif

namespace lockstep::ops {

void linear_forward(const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, bool relu, Tensor& w16,
                    const Exec& ex) {
  const int64_t in = w.size(1), out = w.size(0), B = x.numel() / in;  // rows
  const float* bias = b ? b->data<float>() : nullptr;
  if (on_gpu(x, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    const DType dt = x.dtype();
    const void* wd = is_16bit_float(dt) ? round_weight(w, dt, w16, ex).raw_data() : w.raw_data();
    linear_forward_cuda(dt, gpu_context(ex), B, in, out, x.raw_data(), wd, bias, y.raw_data(), relu);
#endif
    return;
  }
  linear_forward_cpu(B, in, out, x.data<float>(), w.data<float>(), bias, y.data<float>(), relu);
}

void linear_backward(const Tensor& x, const Tensor& w, const Tensor& w16, const Tensor& y, const Tensor& dy,
                     Tensor* dx, Tensor& dw, Tensor* db, bool accumulate, bool relu, const Exec& ex) {
  const int64_t in = w.size(1), out = w.size(0), B = x.numel() / in;  // rows
  float* dbias = db ? db->data<float>() : nullptr;
  if (on_gpu(x, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    const DType dt = x.dtype();
    if (is_16bit_float(dt))  // the 16-bit weight of the forward
      LS_CHECK(w16.defined() && w16.device() == x.device() && w16.dtype() == dt,
               "{}: {} backward without a {} forward", ex.who, dtype_name(dt), dtype_name(dt));
    linear_backward_cuda(dt, gpu_context(ex), B, in, out, x.raw_data(),
                         is_16bit_float(dt) ? w16.raw_data() : w.raw_data(), y.raw_data(), dy.raw_data(),
                         dx ? dx->raw_data() : nullptr, dw.data<float>(), dbias, accumulate, relu);
#endif
    return;
  }
  linear_backward_cpu(B, in, out, x.data<float>(), w.data<float>(), y.data<float>(), dy.data<float>(),
                      dx ? dx->data<float>() : nullptr, dw.data<float>(), dbias, accumulate, relu);
}

}  // namespace lockstep::ops
