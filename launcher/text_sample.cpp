// Sampling a language model's continuation (text_sample.h).
#include "text_sample.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/rng.h"

namespace lockstep {

std::vector<int32_t> sample_tokens(Model& model, std::vector<int32_t> context, const SampleOptions& o) {
  LS_CHECK(!context.empty() && o.window >= 1, "sample_tokens: an empty context or a window of {}", o.window);
  LS_CHECK(model.device().is_cpu(), "sample_tokens: the model's tensors are on {}, not the CPU", model.device().str());
  const int64_t t = o.window, vocab = model.num_classes();
  Tensor x = Tensor::zeros(Shape{1, t}, DType::I32);
  Rng rng(rng_key(o.seed, 0x73616d706c65ull));  // "sample"
  std::vector<double> p(static_cast<size_t>(vocab));
  for (int64_t n = 0; n < o.tokens; ++n) {
    const int64_t used = std::min<int64_t>(static_cast<int64_t>(context.size()), t);
    int32_t* in = x.data<int32_t>();
    std::fill(in, in + t, 0);
    std::copy(context.end() - used, context.end(), in);
    const Tensor& logits = model.net().forward(x, ForwardContext{false, o.seed, n, 0, nullptr, nullptr});
    const float* row = logits.data<float>() + (used - 1) * vocab;  // [1, T, V]: the last real position
    const float top = *std::max_element(row, row + vocab);
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += p[static_cast<size_t>(v)] = std::exp(static_cast<double>(row[v] - top));
    double coin = static_cast<double>(rng.uniform()) * sum;
    int32_t next = static_cast<int32_t>(vocab - 1);
    for (int64_t v = 0; v < vocab; ++v) {
      coin -= p[static_cast<size_t>(v)];
      if (coin <= 0) {
        next = static_cast<int32_t>(v);
        break;
      }
    }
    context.push_back(next);
  }
  return context;
}

}  // namespace lockstep
