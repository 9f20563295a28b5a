// GPT-2 (Radford et al. 2019, as llm.c and nanoGPT build it): token and
// position embeddings, L pre-norm blocks, a final LayerNorm and the output
// projection tied to the token embedding.
//   block: x += proj(attention(qkv(ln_1(x))));  x += fc2(gelu(fc1(ln_2(x))))
//   tokens [B, T] int32 -> logits [B, T, V]
// Sizes: gpt2 12 layers x 12 heads x 768 channels (124M parameters), gpt2-medium
// 24 x 16 x 1024 (350M), gpt2-tiny 4 x 4 x 256; --n-layer, --n-head and
// --n-embd override them. The context (position table) is the model's: 1024,
// or 256 for gpt2-tiny. The token table has the vocabulary's rows padded to a
// multiple of 128 (50,257 -> 50,304, as llm.c). Initialisation as GPT-2's:
// every weight normal(0, 0.02), the two residual projections of each block
// normal(0, 0.02 / sqrt(2 L)), biases zero, LayerNorms 1 and 0; no dropout.
#include <cmath>

#include "nn/attention.h"
#include "nn/embedding.h"
#include "nn/layernorm.h"
#include "nn/layers.h"
#include "nn/residual.h"
#include "nn/tied_linear.h"
#include "registry.h"

namespace lockstep::models {
namespace {

struct GptSize {
  int64_t layers, heads, channels, context;
};

constexpr float kInitStd = 0.02f;
constexpr int64_t kVocabAlign = 128;

std::unique_ptr<Linear> normal_linear(int64_t in, int64_t out, float std) {
  auto l = std::make_unique<Linear>(in, out);
  l->normal_init(std);
  return l;
}

Sequential build_gpt(GptSize size, const ModelSpec& spec) {
  if (spec.n_layer > 0) size.layers = spec.n_layer;
  if (spec.n_head > 0) size.heads = spec.n_head;
  if (spec.n_embd > 0) size.channels = spec.n_embd;
  const int64_t c = size.channels, vocab = spec.num_classes;
  LS_CHECK_INPUT(spec.sample_shape.rank() == 1, "GPT-2 models read token sequences, not samples of shape {}",
                 spec.sample_shape.str());
  const int64_t t = spec.sample_shape[0];
  LS_CHECK_INPUT(c % size.heads == 0, "--n-head {} does not divide --n-embd {} (channels per head)", size.heads, c);
  LS_CHECK_INPUT(t >= 1 && t <= size.context, "--seq-len {} is outside the model's context [1, {}]", t,
                 size.context);
  LS_CHECK_INPUT(vocab >= 1, "a vocabulary of {} tokens", vocab);
  const float proj_std = kInitStd / std::sqrt(2.f * static_cast<float>(size.layers));

  Sequential net;
  auto embedding = std::make_unique<Embedding>(vocab, size.context, c, (vocab + kVocabAlign - 1) / kVocabAlign * kVocabAlign);
  Embedding& wte = *embedding;
  net.add(std::move(embedding));
  for (int64_t l = 0; l < size.layers; ++l) {
    Sequential attn;
    attn.add(std::make_unique<LayerNorm>(c));
    attn.add(normal_linear(c, 3 * c, kInitStd));
    attn.add(std::make_unique<CausalSelfAttention>(size.heads));
    attn.add(normal_linear(c, c, proj_std));
    net.add(std::make_unique<Residual>(fmt::format("Attention(h.{}, heads={})", l, size.heads), std::move(attn),
                                       Sequential(), Residual::Join::Add));
    Sequential mlp;
    mlp.add(std::make_unique<LayerNorm>(c));
    mlp.add(normal_linear(c, 4 * c, kInitStd));
    mlp.add(std::make_unique<GELU>());
    mlp.add(normal_linear(4 * c, c, proj_std));
    net.add(std::make_unique<Residual>(fmt::format("MLP(h.{})", l), std::move(mlp), Sequential(),
                                       Residual::Join::Add));
  }
  net.add(std::make_unique<LayerNorm>(c));
  net.add(std::make_unique<TiedLinear>(wte));
  return net;
}

}  // namespace

Sequential build_gpt2(const ModelSpec& spec) { return build_gpt({12, 12, 768, 1024}, spec); }
Sequential build_gpt2_medium(const ModelSpec& spec) { return build_gpt({24, 16, 1024, 1024}, spec); }
Sequential build_gpt2_tiny(const ModelSpec& spec) { return build_gpt({4, 4, 256, 256}, spec); }

}  // namespace lockstep::models
