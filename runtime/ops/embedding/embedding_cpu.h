// Token and position embedding kernels (CPU):
//   tokens [b, t] int32   wte, dwte [vocab, c]   wpe, dwpe [max_t, c]   y, dy [b, t, c]
// The kernels take the tokens as valid (in [0, vocab)) and t <= max_t; the
// dispatch checks first (embedding_first_bad_token_cpu).
// forward: y[i, j] = wte[tokens[i, j]] + wpe[j], rows split across threads.
// backward: dwpe[j] = (dwpe[j] +) sum over i of dy[i, j], rows of wpe split
//   across threads; dwte: zeroed unless `accumulate`, then dwte[tokens[i, j]]
//   += dy[i, j] for every position in (i, j) order, threads splitting the
//   columns. Every element is summed in the same order at any thread count.
#pragma once

#include <cstdint>

namespace lockstep::ops {

// The index of the first of tokens[0, n) outside [0, vocab); -1 when there is none.
int64_t embedding_first_bad_token_cpu(int64_t n, const int32_t* tokens, int64_t vocab);

void embedding_forward_cpu(int64_t b, int64_t t, int64_t c, const int32_t* tokens, const float* wte, const float* wpe,
                           float* y);
void embedding_backward_cpu(int64_t b, int64_t t, int64_t c, int64_t vocab, int64_t max_t, const int32_t* tokens,
                            const float* dy, float* dwte, float* dwpe, bool accumulate_wte, bool accumulate_wpe);

}  // namespace lockstep::ops
