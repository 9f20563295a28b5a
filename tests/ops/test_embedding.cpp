// Embedding (ops/embedding/embedding.h, nn/embedding.h): the forward is
// wte[token] + wpe[t] exactly; the backward is exact sums (dy values on a grid
// of 1/8 whose sums here are exact in float), a repeated token summing both
// positions' gradients; accumulation; out-of-range tokens and sequences too
// long are input errors naming the value; the same bits at any thread count.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/rng.h"
#include "nn/embedding.h"
#include "ops/embedding/embedding.h"
#include "threads_guard.h"

using namespace lockstep;
using lockstep::testing::ThreadsGuard;

namespace {

const ops::Exec kEx{nullptr, "test"};

Tensor tokens_of(const Shape& s, const std::vector<int32_t>& values) {
  Tensor t = Tensor::zeros(s, DType::I32);
  REQUIRE(static_cast<int64_t>(values.size()) == t.numel());
  std::memcpy(t.data<int32_t>(), values.data(), values.size() * sizeof(int32_t));
  return t;
}

Tensor random_tokens(const Shape& s, int64_t vocab, Rng& rng) {
  Tensor t = Tensor::zeros(s, DType::I32);
  for (int32_t& v : t.span<int32_t>()) v = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
  return t;
}

Tensor normal(const Shape& s, Rng& rng, float scale = 1.f) {
  Tensor t = Tensor::zeros(s);
  for (float& v : t.span<float>()) v = scale * rng.normal();
  return t;
}

// Multiples of 1/8 in [-4, 4]: sums of a few of them are exact in float.
Tensor on_grid(const Shape& s, Rng& rng) {
  Tensor t = Tensor::zeros(s);
  for (float& v : t.span<float>()) v = static_cast<float>(static_cast<int>(rng.below(65)) - 32) / 8.f;
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// The InputError's message that `fn` throws (fails when it throws none, or another kind).
template <typename Fn>
std::string input_error(Fn&& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.message();
  }
  FAIL("no InputError");
  return {};
}

}  // namespace

TEST_CASE("Embedding forward is wte[token] + wpe[t] exactly", "[embedding]") {
  const int64_t vocab = 11, max_t = 8, c = 13, b = 3, t = 5;
  Rng rng(1);
  const Tensor wte = normal(Shape{vocab, c}, rng), wpe = normal(Shape{max_t, c}, rng);
  const Tensor tokens = random_tokens(Shape{b, t}, vocab, rng);
  Tensor y = Tensor::zeros(Shape{b, t, c});
  ops::embedding_forward(tokens, wte, wpe, y, kEx);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < t; ++j) {
      const int32_t tok = tokens.data<int32_t>()[i * t + j];
      for (int64_t k = 0; k < c; ++k)
        REQUIRE(y.data<float>()[(i * t + j) * c + k] == wte.data<float>()[tok * c + k] + wpe.data<float>()[j * c + k]);
    }
}

TEST_CASE("Embedding backward sums dy by token and by position: a repeated token gets both positions",
          "[embedding]") {
  const int64_t vocab = 10, max_t = 6, c = 19, b = 2, t = 4;
  // Token 7 at (0, 1) and (1, 3); token 2 at (0, 0), (0, 2) and (1, 0); 0 and 9 once; the rest unused.
  const Tensor tokens = tokens_of(Shape{b, t}, {2, 7, 2, 9, 2, 0, 4, 7});
  Rng rng(2);
  const Tensor dy = on_grid(Shape{b, t, c}, rng);
  const float* g = dy.data<float>();
  Tensor dwte = Tensor::zeros(Shape{vocab, c}), dwpe = Tensor::zeros(Shape{max_t, c});
  dwte.fill(std::nanf(""));  // overwritten, untouched rows too
  dwpe.fill(std::nanf(""));
  ops::embedding_backward(tokens, dy, dwte, dwpe, false, false, kEx);
  auto row = [&](int64_t i, int64_t j, int64_t k) { return g[(i * t + j) * c + k]; };
  for (int64_t k = 0; k < c; ++k) {
    INFO("channel " << k);
    REQUIRE(dwte.data<float>()[7 * c + k] == row(0, 1, k) + row(1, 3, k));
    REQUIRE(dwte.data<float>()[2 * c + k] == row(0, 0, k) + row(0, 2, k) + row(1, 0, k));
    REQUIRE(dwte.data<float>()[9 * c + k] == row(0, 3, k));
    REQUIRE(dwte.data<float>()[0 * c + k] == row(1, 1, k));
    REQUIRE(dwte.data<float>()[4 * c + k] == row(1, 2, k));
    for (int64_t v : {1, 3, 5, 6, 8}) REQUIRE(dwte.data<float>()[v * c + k] == 0.f);
    for (int64_t j = 0; j < t; ++j) REQUIRE(dwpe.data<float>()[j * c + k] == row(0, j, k) + row(1, j, k));
    for (int64_t j = t; j < max_t; ++j) REQUIRE(dwpe.data<float>()[j * c + k] == 0.f);
  }

  SECTION("accumulate adds to the gradients and leaves untouched rows alone") {
    const std::vector<float> fresh_wte = dwte.to_vector(), fresh_wpe = dwpe.to_vector();
    Tensor acc_wte = on_grid(dwte.shape(), rng), acc_wpe = on_grid(dwpe.shape(), rng);
    const std::vector<float> old_wte = acc_wte.to_vector(), old_wpe = acc_wpe.to_vector();
    ops::embedding_backward(tokens, dy, acc_wte, acc_wpe, true, true, kEx);
    for (int64_t i = 0; i < acc_wte.numel(); ++i)
      REQUIRE(acc_wte.data<float>()[i] == old_wte[static_cast<size_t>(i)] + fresh_wte[static_cast<size_t>(i)]);
    for (int64_t i = 0; i < acc_wpe.numel(); ++i)
      REQUIRE(acc_wpe.data<float>()[i] == old_wpe[static_cast<size_t>(i)] + fresh_wpe[static_cast<size_t>(i)]);
  }
}

TEST_CASE("Embedding gradients by finite differences of the parameters", "[embedding]") {
  // L = sum y * r is linear in wte and wpe: the central difference is exact up
  // to rounding, so it checks the layer end to end (declare, forward, backward).
  const int64_t vocab = 7, max_t = 5, c = 6, b = 2, t = 4;
  Embedding emb(vocab, max_t, c);
  ParameterStore store;
  emb.declare(store, "emb.");
  store.finalize();
  Rng rng(3);
  emb.init(rng);
  const Tensor tokens = tokens_of(Shape{b, t}, {3, 1, 3, 6, 0, 3, 5, 1});
  const Tensor r = normal(Shape{b, t, c}, rng);
  Tensor y = Tensor::zeros(emb.output_shape(tokens.shape()));
  auto loss = [&] {
    emb.forward(tokens, y, ForwardContext{});
    double l = 0;
    for (int64_t i = 0; i < y.numel(); ++i) l += static_cast<double>(y.data<float>()[i]) * r.data<float>()[i];
    return l;
  };
  loss();
  emb.backward(tokens, y, r, nullptr, BackwardContext{false});
  const std::vector<float> grads = store.grads().to_vector();
  const double h = 1e-2;
  for (auto& p : store.params()) {
    INFO("parameter " << p.name);
    float* v = p.value.data<float>();
    for (int64_t i = 0; i < p.numel(); ++i) {
      const float keep = v[i];
      v[i] = keep + static_cast<float>(h);
      const double lp = loss();
      v[i] = keep - static_cast<float>(h);
      const double lm = loss();
      v[i] = keep;
      const double numeric = (lp - lm) / (2 * h);
      const float analytic = grads[static_cast<size_t>(p.offset + i)];
      INFO("element " << i << ": analytic " << analytic << " numeric " << numeric);
      REQUIRE(std::abs(numeric - analytic) <= 1e-4 * std::max(1.0, std::abs(numeric)));
    }
  }
}

TEST_CASE("Embedding refuses tokens outside the vocabulary and sequences too long", "[embedding]") {
  const int64_t vocab = 10, max_t = 8, c = 4;
  Rng rng(4);
  const Tensor wte = normal(Shape{vocab, c}, rng), wpe = normal(Shape{max_t, c}, rng);
  Tensor y = Tensor::zeros(Shape{2, 3, c});
  Tensor dwte = Tensor::zeros(wte.shape()), dwpe = Tensor::zeros(wpe.shape());
  const Tensor dy = normal(Shape{2, 3, c}, rng);

  const Tensor high = tokens_of(Shape{2, 3}, {1, 2, 3, 4, 10, 5});
  std::string msg = input_error([&] { ops::embedding_forward(high, wte, wpe, y, kEx); });
  CHECK_THAT(msg, Catch::Contains("token 10 at batch row 1, position 1") && Catch::Contains("[0, 10)"));
  msg = input_error([&] { ops::embedding_backward(high, dy, dwte, dwpe, false, false, kEx); });
  CHECK_THAT(msg, Catch::Contains("token 10 at batch row 1, position 1"));
  const Tensor negative = tokens_of(Shape{2, 3}, {1, 2, -3, 4, 5, 6});
  msg = input_error([&] { ops::embedding_forward(negative, wte, wpe, y, kEx); });
  CHECK_THAT(msg, Catch::Contains("token -3 at batch row 0, position 2"));

  // T = 9 > max_seq = 8: the op and the layer.
  const Tensor long_seq = Tensor::zeros(Shape{1, 9}, DType::I32);
  Tensor y9 = Tensor::zeros(Shape{1, 9, c});
  msg = input_error([&] { ops::embedding_forward(long_seq, wte, wpe, y9, kEx); });
  CHECK_THAT(msg, Catch::Contains("sequence length 9") && Catch::Contains("8 positions"));
  Embedding emb(vocab, max_t, c);
  msg = input_error([&] { emb.output_shape(Shape{1, 9}); });
  CHECK_THAT(msg, Catch::Contains("sequence length 9 exceeds the maximum 8"));
  ParameterStore store;
  emb.declare(store, "emb.");
  store.finalize();
  msg = input_error([&] { emb.forward(long_seq, y9, ForwardContext{}); });
  CHECK_THAT(msg, Catch::Contains("sequence length 9"));

  // Float tokens are a program error, not an input error.
  const Tensor float_tokens = Tensor::zeros(Shape{2, 3});
  CHECK_THROWS_AS(ops::embedding_forward(float_tokens, wte, wpe, y, kEx), Error);
}

TEST_CASE("Embedding gives the same bits at any thread count", "[embedding]") {
  const int64_t vocab = 500, max_t = 80, c = 203, b = 8, t = 64;
  Rng rng(5);
  const Tensor wte = normal(Shape{vocab, c}, rng), wpe = normal(Shape{max_t, c}, rng);
  const Tensor tokens = random_tokens(Shape{b, t}, 40, rng);  // few distinct tokens: many repeats
  const Tensor dy = normal(Shape{b, t, c}, rng);
  auto run = [&](bool accumulate) {
    Tensor y = Tensor::zeros(Shape{b, t, c});
    Tensor dwte = Tensor::zeros(wte.shape()), dwpe = Tensor::zeros(wpe.shape());
    if (accumulate) {
      Rng fill(6);
      dwte.copy_from(normal(wte.shape(), fill));
      dwpe.copy_from(normal(wpe.shape(), fill));
    }
    ops::embedding_forward(tokens, wte, wpe, y, kEx);
    ops::embedding_backward(tokens, dy, dwte, dwpe, accumulate, accumulate, kEx);
    return std::vector<Tensor>{y, dwte, dwpe};
  };
  for (bool accumulate : {false, true}) {
    INFO("accumulate " << accumulate);
    std::vector<Tensor> one;
    {
      ThreadsGuard guard(1);
      one = run(accumulate);
    }
    for (int threads : {2, 3}) {
      INFO(threads << " threads");
      ThreadsGuard guard(threads);
      const std::vector<Tensor> many = run(accumulate);
      CHECK(same_bits(one[0], many[0]));
      CHECK(same_bits(one[1], many[1]));
      CHECK(same_bits(one[2], many[2]));
    }
  }
}

TEST_CASE("Embedding layer: wte and wpe, GPT-2's initialisation, shapes, no input gradient", "[embedding]") {
  const int64_t vocab = 300, max_t = 40, c = 24;
  Embedding emb(vocab, max_t, c);
  CHECK(emb.describe() == "Embedding(vocab=300, max_seq=40, channels=24)");
  ParameterStore store;
  emb.declare(store, "emb.");
  store.finalize();
  Rng rng(7);
  emb.init(rng);
  REQUIRE(store.params().size() == 2);
  CHECK(store.params()[0].name == "emb.wte");
  CHECK(store.params()[0].shape == Shape{vocab, c});
  CHECK(store.params()[1].name == "emb.wpe");
  CHECK(store.params()[1].shape == Shape{max_t, c});
  for (const auto& p : store.params()) {  // normal(0, 0.02): 7200 and 960 draws
    double sum = 0, sq = 0;
    for (float v : p.value.to_vector()) {
      sum += v;
      sq += static_cast<double>(v) * v;
    }
    const double n = static_cast<double>(p.numel()), mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
    INFO(p.name << ": mean " << mean << " sd " << sd);
    CHECK(std::abs(mean) < 0.003);
    CHECK(std::abs(sd - 0.02) < 0.002);
  }
  CHECK(emb.output_shape(Shape{3, 40}) == Shape{3, 40, c});
  CHECK(emb.held_memory().total() == 0);
  // Forward and backward through the layer; dx is never touched.
  const Tensor tokens = random_tokens(Shape{3, 7}, vocab, rng);
  Tensor y = Tensor::zeros(emb.output_shape(tokens.shape()));
  emb.forward(tokens, y, ForwardContext{});
  Tensor expect = Tensor::zeros(y.shape());
  ops::embedding_forward(tokens, store.params()[0].value, store.params()[1].value, expect, kEx);
  CHECK(same_bits(y, expect));
  const Tensor dy = normal(y.shape(), rng);
  Tensor dx = Tensor::zeros(Shape{3, 7});
  dx.fill(5.f);
  emb.backward(tokens, y, dy, &dx, BackwardContext{false});
  for (float v : dx.to_vector()) REQUIRE(v == 5.f);
  emb.backward(tokens, y, dy, nullptr, BackwardContext{true});
}
