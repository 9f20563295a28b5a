// The language-model options: declared beside the others' groups, converted
// with messages that name the flag (option_values.h).
#include <cxxopts.hpp>

#include "core/error.h"
#include "option_values.h"
#include "options.h"
#include "registry.h"

namespace lockstep {

void add_sequence_options(cxxopts::Options& o, const TrainConfig& d) {
  auto s = [](const std::string& v) { return cxxopts::value<std::string>()->default_value(v); };
  auto f = [](float v) { return cxxopts::value<std::string>()->default_value(fmt::format("{}", v)); };
  o.add_options("model and data")
      ("vocab-size", "the tokens' vocabulary (--dataset tokens, GPT-2 models): the model's output size; a shard "
       "token at or above it is an error. GPT-2's BPE: 50257", s(std::to_string(d.vocab_size)))
      ("seq-len", "tokens per training sample, T (0 = the model's context: 1024 for gpt2, 256 for gpt2-tiny)", s("0"))
      ("n-layer", "GPT-2 models: transformer blocks (0 = the model's)", s("0"))
      ("n-head", "GPT-2 models: attention heads, dividing --n-embd (0 = the model's)", s("0"))
      ("n-embd", "GPT-2 models: channels (0 = the model's)", s("0"));
  o.add_options("optimisation")
      ("beta1", "adam/adamw: first-moment decay", f(d.beta1))
      ("beta2", "adam/adamw: second-moment decay (0.95 is usual for transformers)", f(d.beta2))
      ("eps", "adam/adamw: added to the root of the second moment", f(d.eps))
      ("warmup-steps", "linear learning-rate warmup over this many optimizer steps (instead of --warmup-epochs)",
       s("0"))
      ("min-lr", "cosine schedule: the learning rate it decays to at the last step", f(d.min_lr));
  o.add_options("outputs")
      ("sample-tokens", "GPT-2 models: rank 0 generates this many tokens after training and logs them as text "
       "(greedy decoding, needs --vocab-file)", s("0"))
      ("prompt", "the text --sample-tokens continues (default: from <|endoftext|>)", s(""))
      ("vocab-file", "GPT-2's BPE ranks, gpt2.tiktoken (default: --data-dir/gpt2.tiktoken, which "
       "scripts/data/prepare_austen.sh writes)", s(""));
}

void convert_sequence_options(const cxxopts::ParseResult& r, TrainConfig& c) {
  auto str = [&](const char* k) { return r[k].as<std::string>(); };
  auto count = [&](const char* k, int64_t most) {
    const int64_t v = to_int(k, str(k));
    LS_CHECK_INPUT(v >= 0 && v <= most, "--{}: {} must be in [0, {}]", k, v, most);
    return v;
  };
  const models::ModelInfo& info = models::model_info(c.model);
  c.vocab_size = to_int("vocab-size", str("vocab-size"));
  LS_CHECK_INPUT(c.vocab_size >= 2 && c.vocab_size <= 65536, "--vocab-size: {} must be in [2, 65536] (shards hold "
                 "uint16 tokens)", c.vocab_size);
  c.seq_len = count("seq-len", 1 << 20);
  c.n_layer = count("n-layer", 1024);
  c.n_head = count("n-head", 1024);
  c.n_embd = count("n-embd", 1 << 16);
  const bool sized = c.seq_len > 0 || c.n_layer > 0 || c.n_head > 0 || c.n_embd > 0 || r.count("vocab-size");
  LS_CHECK_INPUT(info.tokens || !sized,
                 "--model {} reads images: --vocab-size, --seq-len, --n-layer, --n-head and --n-embd size GPT-2 "
                 "models", c.model);
  LS_CHECK_INPUT(info.tokens ? c.dataset == DatasetKind::Tokens || c.dataset == DatasetKind::Synthetic
                             : c.dataset != DatasetKind::Tokens,
                 "--model {} and --dataset {}: {}", c.model, name(c.dataset),
                 info.tokens ? "GPT-2 models read token sequences (--dataset tokens or synthetic)"
                             : "--dataset tokens holds token sequences, for the GPT-2 models");
  if (info.tokens && c.seq_len == 0) c.seq_len = info.default_shape[0];
  c.beta1 = to_float("beta1", str("beta1"));
  LS_CHECK_INPUT(c.beta1 >= 0.f && c.beta1 < 1.f, "--beta1: {} must be in [0, 1)", c.beta1);
  c.beta2 = to_float("beta2", str("beta2"));
  LS_CHECK_INPUT(c.beta2 >= 0.f && c.beta2 < 1.f, "--beta2: {} must be in [0, 1)", c.beta2);
  c.eps = to_float("eps", str("eps"));
  LS_CHECK_INPUT(c.eps > 0.f && c.eps <= 1.f, "--eps: {} must be in (0, 1]", c.eps);
  c.warmup_steps = count("warmup-steps", int64_t{1} << 40);
  c.min_lr = to_float("min-lr", str("min-lr"));
  LS_CHECK_INPUT(c.min_lr >= 0.f, "--min-lr: {} must not be negative", c.min_lr);
  c.sample_tokens = count("sample-tokens", 1 << 20);
  c.prompt = str("prompt");
  c.vocab_file = str("vocab-file");
  LS_CHECK_INPUT(info.tokens || (c.sample_tokens == 0 && c.prompt.empty() && c.vocab_file.empty()),
                 "--model {}: --sample-tokens, --prompt and --vocab-file are for GPT-2 models", c.model);
  LS_CHECK_INPUT(c.prompt.empty() || c.sample_tokens > 0, "--prompt needs --sample-tokens");
}

}  // namespace lockstep
