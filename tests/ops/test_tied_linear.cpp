// nn/tied_linear.h: GPT-2's weight tying. The output projection reads the
// token embedding's table; both gradients land in that one parameter.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/rng.h"
#include "nn/embedding.h"
#include "nn/tied_linear.h"

using namespace lockstep;

namespace {

// tokens -> Embedding -> TiedLinear -> logits, with L = sum logits * r.
struct TiedPair {
  Embedding emb;
  TiedLinear head;
  ParameterStore store;
  Tensor tokens, r, h, logits;

  TiedPair(int64_t vocab, int64_t seq, int64_t c, int64_t batch) : emb(vocab, seq, c), head(emb) {
    emb.declare(store, "emb.");
    store.finalize();
    Rng rng(4);
    emb.init(rng);
    for (float& v : store.values().span<float>()) v *= 10.f;  // away from 0.02 so every term matters
    tokens = Tensor::zeros(Shape{batch, seq}, DType::I32);
    for (int32_t& t : tokens.span<int32_t>()) t = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
    tokens.data<int32_t>()[1] = tokens.data<int32_t>()[0];  // a repeated token
    r = Tensor::zeros(Shape{batch, seq, vocab});
    for (float& v : r.span<float>()) v = rng.normal();
    h = Tensor::zeros(Shape{batch, seq, c});
    logits = Tensor::zeros(Shape{batch, seq, vocab});
  }

  double loss() {
    emb.forward(tokens, h, {});
    head.forward(h, logits, {});
    double l = 0;
    for (int64_t i = 0; i < logits.numel(); ++i)
      l += static_cast<double>(logits.data<float>()[i]) * r.data<float>()[i];
    return l;
  }

  // Backward in the order a model runs it: the head, then the embedding.
  void backward(bool accumulate) {
    loss();
    Tensor dh = Tensor::zeros(h.shape());
    BackwardContext bc;
    bc.accumulate = accumulate;
    head.backward(h, logits, r, &dh, bc);
    emb.backward(tokens, h, dh, nullptr, bc);
  }
};

}  // namespace

TEST_CASE("TiedLinear: one table, both gradients summed, by finite differences", "[tied][gradcheck]") {
  TiedPair m(7, 4, 3, 2);
  CHECK(m.head.describe() == "TiedLinear(3, 7)");
  CHECK(m.head.output_shape(Shape{2, 4, 3}) == Shape{2, 4, 7});
  CHECK(m.head.parameters().empty());  // wte is the embedding's: final after the embedding's backward
  CHECK(m.store.params().size() == 2);
  m.backward(false);
  Tensor grads = Tensor::zeros(m.store.grads().shape());
  grads.copy_from(m.store.grads());
  for (const Parameter& p : m.store.params()) {
    INFO("parameter " << p.name);
    for (int64_t i = 0; i < p.numel(); ++i) {
      float& v = p.value.data<float>()[i];
      const float saved = v;
      const double h = 1e-2;
      v = saved + static_cast<float>(h);
      const double up = m.loss();
      v = saved - static_cast<float>(h);
      const double down = m.loss();
      v = saved;
      const double numeric = (up - down) / (2 * h);
      const double analytic = grads.data<float>()[p.offset + i];
      INFO("element " << i << ": analytic " << analytic << " numeric " << numeric);
      // L is quadratic in wte (it appears on both sides): the central
      // difference is exact up to fp32 rounding of the loss.
      CHECK(std::abs(analytic - numeric) <= 2e-3 * std::max(1.0, std::abs(numeric)));
    }
  }
}

TEST_CASE("TiedLinear: accumulation adds both parts to the gradient already there", "[tied]") {
  TiedPair m(5, 3, 4, 2);
  m.backward(false);
  Tensor once = Tensor::zeros(m.store.grads().shape());
  once.copy_from(m.store.grads());
  m.backward(true);
  for (int64_t i = 0; i < once.numel(); ++i)
    CHECK(m.store.grads().data<float>()[i] == Approx(2.f * once.data<float>()[i]).margin(1e-5));
  // Without accumulation the step's gradient replaces it again.
  m.backward(false);
  for (int64_t i = 0; i < once.numel(); ++i) CHECK(m.store.grads().data<float>()[i] == once.data<float>()[i]);
}
