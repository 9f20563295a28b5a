// ResNet models: architecture (parameter counts against the published and
// torchvision figures), shapes at other image sizes, batch norm buffers in
// weights and checkpoints, and one training step at a time end to end.
#include <catch2/catch.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/weights.h"
#include "core/cpu.h"
#include "nn/loss.h"
#include "registry.h"
#include "temp_dir.h"

using namespace lockstep;
using lockstep::testing::TempDir;

namespace {

std::unique_ptr<Model> build(const std::string& name, Shape shape, int64_t classes = 10, uint64_t seed = 1) {
  return models::build_model(name, models::ModelSpec{shape, classes}, seed);
}

Tensor random_batch(const Shape& s, uint64_t seed) {
  Rng rng(seed);
  Tensor t = Tensor::zeros(s);
  for (float& v : t.span<float>()) v = rng.normal();
  return t;
}

}  // namespace

TEST_CASE("ResNet parameter counts match the reference architectures", "[resnet]") {
  // CIFAR ResNets with 1x1 projection shortcuts (option B): 272,474 / 466,906 /
  // 855,770 (option A's zero-padding shortcuts give 2,752 fewer).
  CHECK(build("resnet20", Shape{3, 32, 32})->params().numel() == 272474);
  CHECK(build("resnet32", Shape{3, 32, 32})->params().numel() == 466906);
  CHECK(build("resnet56", Shape{3, 32, 32})->params().numel() == 855770);
  // torchvision.models.resnet50(): 25,557,032 parameters, 53 batch norms.
  const auto r50 = build("resnet50", Shape{3, 224, 224}, 1000);
  CHECK(r50->params().numel() == 25557032);
  CHECK(r50->buffers().params().size() == 2 * 53);
  CHECK(r50->net().shapes(r50->batch_shape(2)).back() == (Shape{2, 1000}));
  // About 4.1 G multiply-adds per 224x224 image (8.2 GFLOP).
  const double gflop = static_cast<double>(r50->net().forward_flops(r50->batch_shape(1))) / 1e9;
  CHECK(gflop > 8.0);
  CHECK(gflop < 8.4);
}

TEST_CASE("ResNets build for smaller and other-shaped inputs", "[resnet]") {
  CHECK(build("resnet50", Shape{3, 64, 64}, 1000)->net().shapes(Shape{1, 3, 64, 64}).back() == (Shape{1, 1000}));
  CHECK(build("resnet50", Shape{3, 32, 32}, 10)->params().numel() > 0);
  CHECK(build("resnet20", Shape{1, 28, 28})->params().numel() == 272474 - 2 * 144);  // 1 input channel
  // Padding keeps every stage at least 1x1, so even tiny images build.
  CHECK(build("resnet50", Shape{3, 4, 4}, 10)->net().shapes(Shape{1, 3, 4, 4}).back() == (Shape{1, 10}));
}

TEST_CASE("batch norm running statistics travel with weights and checkpoints", "[resnet][checkpoint]") {
  TempDir dir;
  auto a = build("resnet20", Shape{3, 8, 8});
  // One training forward moves the running statistics away from (0, 1).
  a->net().forward(random_batch(a->batch_shape(4), 3), ForwardContext{});
  const std::vector<float> buffers = a->buffers().values().to_vector();
  REQUIRE(a->buffers().params().front().name == "layers.1.running_mean");
  REQUIRE(a->buffers().params().front().value.data<float>()[0] != 0.f);

  save_weights(dir.file("w.safetensors"), *a);
  auto b = build("resnet20", Shape{3, 8, 8}, 10, /*seed=*/2);
  load_weights(dir.file("w.safetensors"), *b);
  CHECK(b->buffers().values().to_vector() == buffers);
  CHECK(b->params().values().to_vector() == a->params().values().to_vector());

  auto opt = make_optimizer(a->params(), OptimizerConfig{});
  CheckpointInfo info;
  info.global_batch = 4;
  save_checkpoint(dir.file("ckpt"), *a, *opt, info, 2);
  auto c = build("resnet20", Shape{3, 8, 8}, 10, 3);
  auto copt = make_optimizer(c->params(), OptimizerConfig{});
  REQUIRE(load_latest_checkpoint(dir.file("ckpt"), *c, *copt, [](const std::string&) {}));
  CHECK(c->buffers().values().to_vector() == buffers);

  // Weights of a model without batch norm are not accepted for one with it (and the reverse).
  auto lenet = build("lenet", Shape{3, 32, 32});
  save_weights(dir.file("lenet.safetensors"), *lenet);
  CHECK_THROWS_AS(load_weights(dir.file("lenet.safetensors"), *b), InputError);
}

TEST_CASE("resnet20 learns a fixed batch (training and evaluation modes)", "[resnet]") {
  set_compute_threads(1);
  auto m = build("resnet20", Shape{3, 16, 16});
  auto opt = make_optimizer(m->params(), OptimizerConfig{});
  Tensor x = random_batch(m->batch_shape(8), 5);
  Tensor labels = Tensor::zeros(Shape{8}, DType::I32);
  for (int i = 0; i < 8; ++i) labels.data<int32_t>()[i] = i % 10;
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    const Tensor& logits = m->net().forward(x, ForwardContext{});
    const LossStats s = softmax_cross_entropy(logits, labels);
    if (step == 0) first = s.loss_sum / 8;
    last = s.loss_sum / 8;
    Tensor d = m->net().output_grad();
    softmax_cross_entropy_backward(logits, labels, 1.f / 8, d);
    m->net().backward({});
    opt->step(0.05f);
  }
  INFO("loss " << first << " -> " << last);
  CHECK(last < 0.25 * first);
  // Evaluation mode (running statistics) gives other logits than training mode.
  const std::vector<float> train_logits = m->net().forward(x, ForwardContext{}).to_vector();
  ForwardContext eval;
  eval.training = false;
  CHECK(m->net().forward(x, eval).to_vector() != train_logits);
}
