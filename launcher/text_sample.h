// Text from a trained language model: rank 0 continues a context one token at
// a time, each drawn from the model's softmax at the last position (as
// llm.c's sampler does, temperature 1), and decodes the tokens with GPT-2's
// vocabulary. The model runs on windows of its training length T with the
// context right-padded (a causal model's logits at position t read tokens
// 0..t only), so the activation plan of training serves as it is; a context
// longer than T keeps its last T tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/model.h"

namespace lockstep {

struct SampleOptions {
  int64_t tokens = 0;  // to generate
  int64_t window = 0;  // T: the model's training sequence length
  uint64_t seed = 0;   // the draws
};

// `context` (at least one token) followed by `o.tokens` drawn ones. The model's
// tensors must be on the CPU.
std::vector<int32_t> sample_tokens(Model& model, std::vector<int32_t> context, const SampleOptions& o);

}  // namespace lockstep
