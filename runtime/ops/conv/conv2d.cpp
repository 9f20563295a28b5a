// Dispatch for ops/conv/conv2d.h: the CPU algorithms for host tensors, cuDNN
// (fp32 or 16-bit) for GPU tensors.
#include "ops/conv/conv2d.h"

#include <utility>

#include "core/error.h"
#include "ops/elementwise/elementwise.h"
#include "ops/memory/memory.h"

#ifdef LOCKSTEP_HAVE_CUDA
#include "cuda/context.h"
#include "ops/conv/conv2d_cuda.h"
#endif

namespace lockstep::ops {
namespace {

bool same_geometry(const ConvGeometry& a, const ConvGeometry& b) {
  return a.c == b.c && a.h == b.h && a.w == b.w && a.kh == b.kh && a.kw == b.kw && a.stride == b.stride &&
         a.pad == b.pad && a.oh == b.oh && a.ow == b.ow;
}

}  // namespace

void Conv2dOp::forward(const Conv2dShape& s, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, bool relu,
                       const Exec& ex) {
  winograd_filters_ready_ = false;
  const float* bias = b ? b->data<float>() : nullptr;
  if (on_gpu(x, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    const DType dt = x.dtype();
    if (!gpu_ || !same_geometry(gpu_geometry_, s.g) || gpu_dtype_ != dt || gpu_layout_ != layout_) {
      // descriptors for a new image size, type or layout
      const ConvData data = dt == DType::BF16 ? ConvData::BF16 : dt == DType::F16 ? ConvData::F16 : ConvData::F32;
      gpu_ = std::make_shared<Conv2dCuda>(s.oc, s.g, data, layout_);
      gpu_geometry_ = s.g;
      gpu_dtype_ = dt;
      gpu_layout_ = layout_;
    }
    const void* wd = is_16bit_float(dt) ? round_weight(w, dt, w16_, ex).raw_data() : w.raw_data();
    gpu_->forward(gpu_context(ex), s.n, x.raw_data(), wd, bias, y.raw_data(), relu);
#endif
    return;
  }
  if (layout_ == Layout::NHWC) {
    conv2d_nhwc_forward_cpu(s, x.data<float>(), w.data<float>(), bias, y.data<float>(), relu, ws_);
  } else if (conv2d_choose(s, algo_) == ConvAlgo::Winograd) {
    conv2d_winograd_forward_cpu(s, x.data<float>(), w.data<float>(), bias, y.data<float>(), relu, ws_);
    winograd_filters_ready_ = true;
  } else {
    conv2d_forward_cpu(s, x.data<float>(), w.data<float>(), bias, y.data<float>(), relu, ws_);
    winograd_filters_ready_ = false;  // the choice depends on the batch: no stale transform for a later backward
  }
}

void Conv2dOp::backward(const Conv2dShape& s, const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& dy,
                        Tensor* dx, Tensor& dw, Tensor* db, bool accumulate, bool relu, const Exec& ex) {
  float* dbias = db ? db->data<float>() : nullptr;
  if (on_gpu(x, ex)) {
#ifdef LOCKSTEP_HAVE_CUDA
    const DType dt = x.dtype();
    const bool half = is_16bit_float(dt);
    LS_CHECK(gpu_ && same_geometry(gpu_geometry_, s.g) && gpu_dtype_ == dt && gpu_layout_ == layout_ &&
                 (!half || w16_.defined()),
             "{}: {} backward without a {} forward on this input", ex.who, dtype_name(dt), dtype_name(dt));
    gpu_->backward(gpu_context(ex), s.n, x.raw_data(), half ? w16_.raw_data() : w.raw_data(), y.raw_data(),
                   dy.raw_data(), dx ? dx->raw_data() : nullptr, dw.data<float>(), dbias, accumulate, relu);
#endif
    return;
  }
  float* dxp = dx ? dx->data<float>() : nullptr;
  if (layout_ == Layout::NHWC)
    conv2d_nhwc_backward_cpu(s, x.data<float>(), w.data<float>(), y.data<float>(), dy.data<float>(), dxp,
                             dw.data<float>(), dbias, accumulate, relu, ws_);
  else if (conv2d_choose(s, algo_) == ConvAlgo::Winograd)
    conv2d_winograd_backward_cpu(s, x.data<float>(), w.data<float>(), y.data<float>(), dy.data<float>(), dxp,
                                 dw.data<float>(), dbias, accumulate, relu, ws_,
                                 std::exchange(winograd_filters_ready_, false));
  else
    conv2d_backward_cpu(s, x.data<float>(), w.data<float>(), y.data<float>(), dy.data<float>(), dxp,
                        dw.data<float>(), dbias, accumulate, relu, ws_);
}

}  // namespace lockstep::ops
