// Dispatch for ops/embedding/embedding.h: the CPU kernels for host tensors
// (fp32 tables, int32 tokens); GPU tensors are refused until the family has
// CUDA kernels. The tokens and the sequence length are checked here, before
// any kernel indexes with them.
#include "ops/embedding/embedding.h"

#include "core/error.h"
#include "ops/embedding/embedding_cpu.h"
#include "ops/memory/memory.h"

namespace lockstep::ops {
namespace {

// Shapes, types and devices; then the sequence length against wpe's rows.
void require_layout(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& out, const char* what,
                    const Exec& ex) {
  LS_CHECK(tokens.rank() == 2 && tokens.dtype() == DType::I32 && tokens.device() == wte.device(),
           "{}: tokens of {} {} on {} (expected I32 [B, T] on {})", ex.who, dtype_name(tokens.dtype()),
           tokens.shape().str(), tokens.device().str(), wte.device().str());
  LS_CHECK(wte.rank() == 2 && wpe.rank() == 2 && wpe.size(1) == wte.size(1) && wpe.dtype() == wte.dtype() &&
               wpe.device() == wte.device(),
           "{}: token table {} {} on {} with position table {} {} on {}", ex.who, dtype_name(wte.dtype()),
           wte.shape().str(), wte.device().str(), dtype_name(wpe.dtype()), wpe.shape().str(), wpe.device().str());
  const Shape expected{tokens.size(0), tokens.size(1), wte.size(1)};
  LS_CHECK(out.shape() == expected && out.dtype() == wte.dtype() && out.device() == wte.device(),
           "{}: {} of {} {} on {} (expected {} {} on {})", ex.who, what, dtype_name(out.dtype()), out.shape().str(),
           out.device().str(), dtype_name(wte.dtype()), expected.str(), wte.device().str());
  LS_CHECK_INPUT(tokens.size(1) <= wpe.size(0),
                 "{}: sequence length {} exceeds the {} positions of the position embedding", ex.who, tokens.size(1),
                 wpe.size(0));
}

void require_valid_tokens(const Tensor& tokens, int64_t vocab, const Exec& ex) {
  const int32_t* tok = tokens.data<int32_t>();
  const int64_t i = embedding_first_bad_token_cpu(tokens.numel(), tok, vocab);
  if (i >= 0) {
    const int64_t t = tokens.size(1);
    LS_INPUT_ERROR("{}: token {} at batch row {}, position {} is outside the vocabulary [0, {})", ex.who, tok[i],
                   i / t, i % t, vocab);
  }
}

}  // namespace

void embedding_forward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, Tensor& y, const Exec& ex) {
  require_layout(tokens, wte, wpe, y, "output", ex);
  require_cpu_kernel(wte, "embedding forward", ex);
  require_valid_tokens(tokens, wte.size(0), ex);
  embedding_forward_cpu(tokens.size(0), tokens.size(1), wte.size(1), tokens.data<int32_t>(), wte.data<float>(),
                        wpe.data<float>(), y.data<float>());
}

void embedding_backward(const Tensor& tokens, const Tensor& dy, Tensor& dwte, Tensor& dwpe, bool accumulate_wte,
                        bool accumulate_wpe, const Exec& ex) {
  require_layout(tokens, dwte, dwpe, dy, "output gradient", ex);
  require_cpu_kernel(dwte, "embedding backward", ex);
  require_valid_tokens(tokens, dwte.size(0), ex);
  embedding_backward_cpu(tokens.size(0), tokens.size(1), dwte.size(1), dwte.size(0), dwpe.size(0),
                         tokens.data<int32_t>(), dy.data<float>(), dwte.data<float>(), dwpe.data<float>(), accumulate_wte,
                         accumulate_wpe);
}

}  // namespace lockstep::ops
