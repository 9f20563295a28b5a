// CausalSelfAttention: shapes, the statistics it keeps, and the calls to the
// attention ops.
#include "nn/attention.h"

#include <fmt/format.h>

#include "core/error.h"
#include "nn/shared_scratch.h"
#include "ops/attention/attention.h"

namespace lockstep {

CausalSelfAttention::CausalSelfAttention(int64_t n_head)
    : n_head_(n_head), name_(fmt::format("CausalSelfAttention(n_head={})", n_head)) {
  LS_CHECK(n_head > 0, "{}: the number of heads must be positive", name_);
}

Shape CausalSelfAttention::output_shape(const Shape& in) const {
  LS_CHECK(in.rank() == 3 && in[2] % (3 * n_head_) == 0 && in[2] > 0,
           "{} expects input [B, T, 3C] with C a multiple of {}, got {}", name_, n_head_, in.str());
  return Shape{in[0], in[1], in[2] / 3};
}

int64_t CausalSelfAttention::forward_flops(const Shape& in) const {
  const Shape o = output_shape(in);
  // Per (b, h): T (T + 1) / 2 scores of D multiply-adds, and as many for P V.
  return 2 * 2 * o[0] * o[2] * (o[1] * (o[1] + 1) / 2);
}

HeldMemory CausalSelfAttention::held_memory() const {
  return {0, 0, static_cast<int64_t>(lse_.nbytes()) + (shared_ ? 0 : ws_.thread_bytes())};
}

void CausalSelfAttention::share_scratch(const std::shared_ptr<SharedScratch>& scratch) {
  ws_.share_thread_buffers(scratch->workspace());
  shared_ = true;
}

void CausalSelfAttention::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  ops::causal_attention_forward(x, y, lse_, n_head_, ws_, ops::Exec{ctx.gpu, name_.c_str()});
}

void CausalSelfAttention::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx,
                                   const BackwardContext& ctx) {
  if (dx) ops::causal_attention_backward(x, y, lse_, dy, *dx, n_head_, ws_, ops::Exec{ctx.gpu, name_.c_str()});
}

}  // namespace lockstep
