// GPT-2's weights files in Hugging Face's names and layout (the state_dict of
// transformers' GPT2LMHeadModel), which save_weights writes and load_weights
// reads for the GPT-2 models. For L blocks and a vocabulary of V tokens:
//   layers.0.wte                  transformer.wte.weight  [V, C]: the padding
//                                 rows are not stored; loading zeroes them
//   layers.0.wpe                  transformer.wpe.weight  [context, C]
//   layers.{1+2l}.branch.{0,1,3}  transformer.h.{l}.{ln_1, attn.c_attn, attn.c_proj}
//   layers.{2+2l}.branch.{0,1,3}  transformer.h.{l}.{ln_2, mlp.c_fc, mlp.c_proj}
//   layers.{1+2L}                 transformer.ln_f
// each with .weight and .bias. The four Linear weights per block are stored
// transposed, [in, out] (Hugging Face's Conv1D). A file may leave out the
// "transformer." prefix (the hub's gpt2 files do), may hold lm_head.weight
// (which must equal the token table: the model ties them), and may hold the
// h.{l}.attn.bias and attn.masked_bias causal-mask buffers, which are ignored.
#pragma once

#include <memory>

#include "checkpoint/weights_layout.h"
#include "nn/model.h"

namespace lockstep::models {

// For a model that build_gpt2 / _medium / _tiny built.
std::shared_ptr<const WeightsLayout> gpt2_weights_layout(const Model& model);

}  // namespace lockstep::models
