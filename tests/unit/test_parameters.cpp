// ParameterStore layout and Sequential memory planning.
#include <catch2/catch.hpp>
#include <cmath>

#include "nn/layers.h"
#include "nn/model.h"
#include "registry.h"

using namespace lockstep;

TEST_CASE("parameters are laid out in reverse declaration order, aligned", "[params]") {
  ParameterStore store;
  Parameter* a = store.declare("a", Shape{3});
  Parameter* b = store.declare("b", Shape{2, 5});
  Parameter* c = store.declare("c", Shape{17});
  store.finalize();
  CHECK(c->offset == 0);
  CHECK(b->offset == 32);  // 17 rounded up to 32
  CHECK(a->offset == 48);  // 10 rounded up to 16
  CHECK(store.padded_numel() == 64);
  CHECK(store.numel() == 30);
  for (const auto& p : store.params()) CHECK(p.offset % ParameterStore::kAlignElements == 0);
  // Views alias the flat buffers.
  b->value.data<float>()[3] = 7.f;
  CHECK(store.values().data<float>()[35] == 7.f);
  c->grad.data<float>()[16] = 2.f;
  CHECK(store.grads().data<float>()[16] == 2.f);
  CHECK_THROWS(store.declare("d", Shape{1}));
}

TEST_CASE("gradients become final front-to-back in the flat buffer", "[params]") {
  auto model = models::build_model("lenet", {}, 1);
  Sequential& net = model->net();
  // The hook reports a growing prefix [0, end) of final gradients, one call per
  // layer with parameters, ending at the whole buffer; every end is where the
  // next parameter starts.
  std::vector<int64_t> ends;
  net.set_grad_ready_hook([&](int64_t end) { ends.push_back(end); });
  Tensor x = Tensor::zeros(model->batch_shape(2));
  net.forward(x, {});
  net.output_grad().fill(0.1f);
  net.backward({});
  REQUIRE(ends.size() == 4);
  CHECK(std::is_sorted(ends.begin(), ends.end()));
  CHECK(ends.back() == model->params().padded_numel());
  for (size_t i = 0; i + 1 < ends.size(); ++i) {
    bool boundary = false;
    for (const auto& p : model->params().params()) boundary = boundary || p.offset == ends[i];
    CHECK(boundary);
  }
  // The last layer's parameters come first.
  CHECK(model->params().find("layers.9.bias")->offset == 0);
}

TEST_CASE("forward waits for each layer's parameters, from the first layer's down", "[params]") {
  auto model = models::build_model("lenet", {}, 1);
  Sequential& net = model->net();
  // One call per layer with parameters, before it runs, with the lowest offset
  // of its parameters: decreasing (forward order is the store's reverse),
  // the last at 0, and no call after the layer has run.
  std::vector<int64_t> froms;
  std::vector<size_t> ran;
  net.set_parameter_wait_hook([&](int64_t from) { froms.push_back(from); });
  net.set_layer_observer([&](size_t layer, Sequential::Phase phase, auto, auto) {
    if (phase == Sequential::Phase::Forward && net.layer(layer).has_parameters()) {
      CHECK(froms.size() == ran.size() + 1);  // its wait came first
      ran.push_back(layer);
    }
  });
  Tensor x = Tensor::zeros(model->batch_shape(2));
  net.forward(x, {});
  REQUIRE(froms.size() == 4);
  CHECK(ran.size() == 4);
  CHECK(std::is_sorted(froms.rbegin(), froms.rend()));
  CHECK(froms.back() == 0);
  for (size_t i = 0; i < ran.size(); ++i) {
    int64_t lowest = INT64_MAX;
    for (const Parameter* p : net.layer(ran[i]).parameters()) lowest = std::min(lowest, p->offset);
    CHECK(froms[i] == lowest);
  }
}

TEST_CASE("a 16-bit compute type leaves host inputs in fp32 and only accepts fp32, bf16 or fp16", "[params]") {
  // Mixed precision converts GPU inputs only; on the CPU the same model with
  // set_compute_dtype(BF16) must give the fp32 results bit for bit.
  auto a = models::build_model("lenet", {}, 1);
  auto b = models::build_model("lenet", {}, 1);
  b->net().set_compute_dtype(DType::BF16);
  CHECK(b->net().compute_dtype() == DType::BF16);
  Tensor x = Tensor::zeros(a->batch_shape(3));
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 17) / 17.f;
  const Tensor& ya = a->net().forward(x, {});
  const Tensor& yb = b->net().forward(x, {});
  REQUIRE(yb.dtype() == DType::F32);
  CHECK(ya.to_vector() == yb.to_vector());
  a->net().output_grad().fill(0.25f);
  b->net().output_grad().fill(0.25f);
  Tensor ga = Tensor::zeros(x.shape()), gb = Tensor::zeros(x.shape());
  a->net().backward({}, &ga);
  b->net().backward({}, &gb);
  CHECK(ga.to_vector() == gb.to_vector());
  CHECK(a->params().grads().to_vector() == b->params().grads().to_vector());
  b->net().set_compute_dtype(DType::F16);  // fp16 likewise converts GPU inputs only
  CHECK(b->net().forward(x, {}).to_vector() == ya.to_vector());
  CHECK_THROWS(b->net().set_compute_dtype(DType::F64));
  CHECK_THROWS(b->net().set_compute_dtype(DType::I32));
}

TEST_CASE("the planner fuses ReLU into Conv2d/Linear and runs Dropout in place only when safe", "[params]") {
  auto model = models::build_model("keras-cnn", {}, 1);
  Sequential& net = model->net();
  Tensor x = Tensor::zeros(model->batch_shape(4));
  net.forward(x, {});
  const auto& a = net.planned_aliasing();
  // conv ReLU conv ReLU maxpool dropout flatten linear ReLU dropout linear
  CHECK(a[1] == Aliasing::Fused);
  CHECK(a[3] == Aliasing::Fused);
  CHECK(a[4] == Aliasing::None);
  CHECK(a[5] == Aliasing::InPlace);  // after max pooling, whose backward needs only indices
  CHECK(a[6] == Aliasing::View);
  CHECK(a[8] == Aliasing::Fused);
  CHECK(a[9] == Aliasing::None);     // the fused ReLU's output is read by Linear's backward
}

TEST_CASE("model summary and parameter names follow PyTorch's nn.Sequential", "[params]") {
  auto model = models::build_model("lenet", {}, 1);
  std::vector<std::string> names;
  for (const auto& p : model->params().params()) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"layers.0.weight", "layers.0.bias", "layers.3.weight", "layers.3.bias",
                                          "layers.7.weight", "layers.7.bias", "layers.9.weight", "layers.9.bias"});
  CHECK(model->params().find("layers.7.weight")->shape == (Shape{128, 800}));
  CHECK(model->params().numel() == 20 * 9 + 20 + 50 * 500 + 50 + 128 * 800 + 128 + 10 * 128 + 10);
}

TEST_CASE("the same seed gives the same initial weights, another seed different ones", "[params]") {
  auto a = models::build_model("mlp", {}, 5);
  auto b = models::build_model("mlp", {}, 5);
  auto c = models::build_model("mlp", {}, 6);
  CHECK(a->params().values().to_vector() == b->params().values().to_vector());
  CHECK(a->params().values().to_vector() != c->params().values().to_vector());
}

TEST_CASE("every model builds for 28x28x1 and for other sample shapes", "[params]") {
  for (const auto& name : models::model_names()) {
    if (models::model_info(name).tokens) continue;  // the GPT-2 models: below
    auto m = models::build_model(name, {Shape{1, 28, 28}, 10}, 1);
    CHECK(m->params().numel() > 0);
    auto big = models::build_model(name, {Shape{3, 32, 32}, 7}, 1);
    Tensor x = Tensor::zeros(big->batch_shape(3));
    CHECK(big->net().forward(x, {}).shape() == (Shape{3, 7}));
  }
  CHECK_THROWS_AS(models::build_model("resnet9000", {}, 1), InputError);
}

TEST_CASE("GPT-2 models: llm.c's parameter count, sizes from the spec, one-line errors", "[params][transformer]") {
  // llm.c's GPT-2 124M with the vocabulary padded to 50,304 rows: 124,475,904.
  auto small = models::build_model("gpt2", {Shape{64}, models::kGpt2Vocab}, 1);
  CHECK(small->params().numel() == 124475904);
  CHECK(small->net().shapes(Shape{2, 64}).back() == (Shape{2, 64, models::kGpt2Vocab}));
  // 2 blocks of 32 channels, 4 heads; vocabulary 100 padded to 128 rows.
  models::ModelSpec spec{Shape{16}, 100, 2, 4, 32};
  auto m = models::build_model("gpt2-tiny", spec, 1);
  const int64_t c = 32, blocks = 2;
  CHECK(m->params().numel() == 128 * c + 256 * c + blocks * (12 * c * c + 13 * c) + 2 * c);
  Tensor tokens = Tensor::zeros(Shape{3, 16}, DType::I32);
  CHECK(m->net().forward(tokens, {}).shape() == (Shape{3, 16, 100}));
  // Residual projections start at 0.02 / sqrt(2 * blocks), the rest at 0.02.
  auto stdev = [&](const char* name) {
    const Parameter* p = m->params().find(name);
    REQUIRE(p != nullptr);
    double sq = 0;
    for (float v : p->value.span<float>()) sq += static_cast<double>(v) * v;
    return std::sqrt(sq / static_cast<double>(p->numel()));
  };
  CHECK(stdev("layers.1.branch.1.weight") == Approx(0.02).epsilon(0.05));
  CHECK(stdev("layers.1.branch.3.weight") == Approx(0.01).epsilon(0.1));
  CHECK(stdev("layers.2.branch.3.weight") == Approx(0.01).epsilon(0.1));
  // The padding rows of the token table are zero.
  const Parameter* wte = m->params().find("layers.0.wte");
  for (int64_t i = 100 * c; i < 128 * c; ++i) CHECK(wte->value.data<float>()[i] == 0.f);

  auto message = [](const char* model, models::ModelSpec s) {
    try {
      models::build_model(model, s, 1);
    } catch (const InputError& e) {
      return e.message();
    }
    return std::string("no error");
  };
  CHECK_THAT(message("gpt2-tiny", {Shape{16}, 100, 0, 5, 0}),
             Catch::Contains("--n-head 5 does not divide --n-embd 256"));
  CHECK_THAT(message("gpt2-tiny", {Shape{257}, 100}), Catch::Contains("--seq-len 257 is outside the model's context"));
  CHECK_THAT(message("gpt2", {Shape{1, 28, 28}, 10}), Catch::Contains("reads token sequences, the data holds images"));
  CHECK_THAT(message("lenet", {Shape{64}, 100}), Catch::Contains("reads images, the data holds token sequences"));
}
