// Dispatch for ops/attention/attention.h: the CPU kernels for fp32 host
// tensors; GPU tensors are refused (no CUDA kernel yet).
#include "ops/attention/attention.h"

#include "core/error.h"
#include "ops/attention/attention_cpu.h"
#include "ops/memory/memory.h"

namespace lockstep::ops {
namespace {

// The shape of qkv [B, T, 3C], checked against n_head.
AttentionShape attention_shape(const Tensor& qkv, int64_t n_head, const Exec& ex) {
  LS_CHECK(qkv.rank() == 3 && qkv.size(2) % 3 == 0, "{}: attention input {} is not [B, T, 3C]", ex.who,
           qkv.shape().str());
  const int64_t c = qkv.size(2) / 3;
  LS_CHECK(n_head > 0 && c > 0 && c % n_head == 0, "{}: {} channels do not split into {} heads", ex.who, c, n_head);
  return {qkv.size(0), qkv.size(1), c, n_head};
}

void require_shape(const Tensor& t, const Shape& shape, const Tensor& qkv, const char* what, const Exec& ex) {
  LS_CHECK(t.shape() == shape && t.dtype() == qkv.dtype() && t.device() == qkv.device(),
           "{}: attention {} of {} {} on {}, expected {} {} on {}", ex.who, what, dtype_name(t.dtype()),
           t.shape().str(), t.device().str(), dtype_name(qkv.dtype()), shape.str(), qkv.device().str());
}

}  // namespace

void causal_attention_forward(const Tensor& qkv, Tensor& y, Tensor& lse, int64_t n_head, Workspace& ws,
                              const Exec& ex) {
  const AttentionShape s = attention_shape(qkv, n_head, ex);
  require_cpu_kernel(qkv, "causal attention forward", ex);
  require_shape(y, Shape{s.b, s.t, s.c}, qkv, "output", ex);
  ensure_scratch(lse, s.b * s.n_head * s.t, qkv.dtype(), qkv.device(), ex);
  causal_attention_forward_cpu(s, qkv.data<float>(), y.data<float>(), lse.data<float>(), ws);
}

void causal_attention_backward(const Tensor& qkv, const Tensor& y, const Tensor& lse, const Tensor& dy, Tensor& dqkv,
                               int64_t n_head, Workspace& ws, const Exec& ex) {
  const AttentionShape s = attention_shape(qkv, n_head, ex);
  require_cpu_kernel(qkv, "causal attention backward", ex);
  require_shape(y, Shape{s.b, s.t, s.c}, qkv, "output", ex);
  require_shape(dy, Shape{s.b, s.t, s.c}, qkv, "output gradient", ex);
  LS_CHECK(lse.numel() >= s.b * s.n_head * s.t && lse.dtype() == qkv.dtype() && lse.device() == qkv.device(),
           "{}: attention statistics of {} {} on {} for [{}, {}, {}]", ex.who, dtype_name(lse.dtype()),
           lse.shape().str(), lse.device().str(), s.b, s.n_head, s.t);
  require_shape(dqkv, qkv.shape(), qkv, "input gradient", ex);
  causal_attention_backward_cpu(s, qkv.data<float>(), y.data<float>(), lse.data<float>(), dy.data<float>(),
                                dqkv.data<float>(), ws);
}

}  // namespace lockstep::ops
