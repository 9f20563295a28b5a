// Dispatch for ops/layernorm/layernorm.h: the CPU kernels for fp32 host
// tensors; GPU tensors are refused until the family has CUDA kernels.
#include "ops/layernorm/layernorm.h"

#include "core/error.h"
#include "ops/layernorm/layernorm_cpu.h"
#include "ops/memory/memory.h"

namespace lockstep::ops {
namespace {

// Throws unless `t` is an fp32 vector of `n` elements on `device` (weights and
// their gradients).
void require_vector(const Tensor& t, int64_t n, Device device, const char* what, const Exec& ex) {
  LS_CHECK(t.numel() == n && t.dtype() == DType::F32 && t.device() == device,
           "{}: {} of {} {} on {} (expected F32 [{}] on {})", ex.who, what, dtype_name(t.dtype()), t.shape().str(),
           t.device().str(), n, device.str());
}

// The same for the per-row statistics, which may be longer (scratch grown for a larger batch).
void require_stats(const Tensor& t, int64_t n, Device device, const char* what, const Exec& ex) {
  LS_CHECK(t.numel() >= n && t.dtype() == DType::F32 && t.device() == device,
           "{}: {} of {} {} on {} (expected F32 of at least {} on {}: a forward of these rows first)", ex.who, what,
           dtype_name(t.dtype()), t.shape().str(), t.device().str(), n, device.str());
}

void require_rows(const Tensor& x, const Exec& ex) {
  LS_CHECK(x.rank() == 2 && x.size(1) > 0, "{}: layer norm of {} (expected rows [N, C])", ex.who, x.shape().str());
}

}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y, Tensor& mean,
                       Tensor& rstd, const Exec& ex) {
  require_rows(x, ex);
  require_same(x, y, ex);
  const int64_t n = x.size(0), c = x.size(1);
  require_vector(weight, c, x.device(), "weight", ex);
  require_vector(bias, c, x.device(), "bias", ex);
  require_cpu_kernel(x, "layer norm forward", ex);
  ensure_scratch(mean, n, DType::F32, x.device(), ex);
  ensure_scratch(rstd, n, DType::F32, x.device(), ex);
  layernorm_forward_cpu(n, c, x.data<float>(), weight.data<float>(), bias.data<float>(), eps, y.data<float>(),
                        mean.data<float>(), rstd.data<float>());
}

void layernorm_backward(const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                        const Tensor& dy, Tensor* dx, Tensor& dweight, Tensor& dbias, bool accumulate,
                        const Exec& ex) {
  require_rows(x, ex);
  require_same(x, dy, ex);
  if (dx) require_same(x, *dx, ex);
  const int64_t n = x.size(0), c = x.size(1);
  require_vector(weight, c, x.device(), "weight", ex);
  require_stats(mean, n, x.device(), "mean", ex);
  require_stats(rstd, n, x.device(), "rstd", ex);
  require_vector(dweight, c, x.device(), "weight gradient", ex);
  require_vector(dbias, c, x.device(), "bias gradient", ex);
  require_cpu_kernel(x, "layer norm backward", ex);
  layernorm_backward_cpu(n, c, x.data<float>(), weight.data<float>(), mean.data<float>(), rstd.data<float>(),
                         dy.data<float>(), dx ? dx->data<float>() : nullptr, dweight.data<float>(),
                         dbias.data<float>(), accumulate);
}

}  // namespace lockstep::ops
