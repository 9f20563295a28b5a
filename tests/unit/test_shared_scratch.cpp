// The model-wide memory (nn/shared_scratch.h, nn/activation_arena.h): every
// chain places its activations in the model's one arena and takes its
// gradients there, every convolution uses the same per-thread buffers, a
// fused residual join's branch holds no output, and no layer reads what
// another left (gradients NaN-filled as they are taken, the per-thread
// buffers between every pass: the results stay bitwise those of an
// untouched twin).
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>

#include "core/cpu.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/residual.h"
#include "optim/optimizer.h"
#include "registry.h"

using namespace lockstep;

namespace {

std::unique_ptr<Model> build(const std::string& name, Shape shape, uint64_t seed = 1) {
  return models::build_model(name, models::ModelSpec{shape, 10}, seed);
}

Tensor random_batch(const Shape& s, uint64_t seed) {
  Rng rng(seed);
  Tensor t = Tensor::zeros(s);
  for (float& v : t.span<float>()) v = rng.normal();
  return t;
}

Tensor labels_for(int64_t batch) {
  Tensor labels = Tensor::zeros(Shape{batch}, DType::I32);
  for (int64_t i = 0; i < batch; ++i) labels.data<int32_t>()[i] = static_cast<int32_t>(i % 10);
  return labels;
}

// One SGD step; `poison` fills the model's per-thread buffers with NaN before
// the forward and again between the forward and the backward, and every
// gradient the backward takes from the arena.
void train_step(Model& m, Optimizer& opt, const Tensor& x, const Tensor& labels, bool poison) {
  Sequential& net = m.net();
  constexpr float nan = std::numeric_limits<float>::quiet_NaN();
  if (poison && net.scratch()) net.scratch()->fill(nan);
  const Tensor& logits = net.forward(x, ForwardContext{});
  if (poison) {
    net.scratch()->fill(nan);
    net.arena()->poison(nan);
  }
  Tensor d = net.output_grad();
  softmax_cross_entropy_backward(logits, labels, 1.f / static_cast<float>(x.shape()[0]), d);
  net.backward({});
  opt.step(0.05f);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();  // a store with nothing in it
  if (a.nbytes() != b.nbytes()) return false;
  return a.nbytes() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// resnet20 on [3, side, side] after one training forward of 2 samples (memory planned).
std::unique_ptr<Model> resnet20_planned(int64_t side) {
  auto m = build("resnet20", Shape{3, side, side});
  m->net().forward(random_batch(m->batch_shape(2), 3), ForwardContext{});
  return m;
}

}  // namespace

TEST_CASE("a model's chains share one scratch and one activation arena", "[scratch]") {
  set_compute_threads(2);
  auto m = resnet20_planned(32);
  Sequential& net = m->net();
  const std::shared_ptr<SharedScratch> scratch = net.scratch();
  const std::shared_ptr<ActivationArena> arena = net.arena();
  REQUIRE(scratch != nullptr);
  REQUIRE(arena != nullptr);
  int blocks = 0, projections = 0;
  int64_t chains = net.activation_bytes();
  for (size_t i = 0; i < net.size(); ++i) {
    auto* block = dynamic_cast<Residual*>(&net.layer(i));
    if (!block) continue;
    ++blocks;
    CHECK(block->branch().scratch() == scratch);
    CHECK(block->branch().arena() == arena);
    chains += block->branch().activation_bytes();
    if (block->shortcut().size()) {
      ++projections;
      CHECK(block->shortcut().scratch() == scratch);
      CHECK(block->shortcut().arena() == arena);
      chains += block->shortcut().activation_bytes();
    }
  }
  CHECK(blocks == 9);
  CHECK(projections == 2);
  // Every activation but the model's output (the logits, kept apart) is in the
  // arena: its planned part is their sum and a little alignment padding.
  const int64_t logits = 2 * 10 * 4;
  const int64_t placed = arena->activation_elements() * 4;
  CHECK(placed >= chains - logits);
  CHECK(placed < chains - logits + 64 * 4 * 64);  // under 256 bytes of padding for each of < 64 activations
}

TEST_CASE("the arena is allocated once, at the size its rehearsal found (fixed addresses: CUDA graphs)",
          "[scratch]") {
  // The plan rehearses the backward's gradient requests to size the headroom:
  // the first backward fits, nothing grows, every step takes the same memory.
  set_compute_threads(1);
  auto m = build("resnet20", Shape{3, 16, 16});
  auto opt = make_optimizer(m->params(), OptimizerConfig{});
  const Tensor labels = labels_for(4);
  std::vector<const void*> blocks;
  std::vector<uint64_t> generations;
  for (int step = 0; step < 4; ++step) {
    train_step(*m, *opt, random_batch(m->batch_shape(4), 20 + static_cast<uint64_t>(step)), labels, false);
    const ActivationArena& arena = *m->net().arena();
    CHECK(arena.gradient_top() <= arena.capacity_elements());
    blocks.push_back(arena.storage().raw_data());
    generations.push_back(arena.generation());
  }
  // Generation 1: the first forward's commit made the only block (a backward
  // that outgrew the rehearsal would have grown it after step 0).
  CHECK(generations[0] == 1);
  for (int step = 1; step < 4; ++step) {
    CHECK(generations[step] == generations[0]);
    CHECK(blocks[step] == blocks[0]);
  }
}

TEST_CASE("a model re-planned for a larger batch trains as one planned for it from the start", "[scratch]") {
  // An evaluation at a larger batch re-plans the arena: every chain drops its
  // views of the old block (and batch norm its join output) before the new
  // block is made, then rebinds. Twin b is planned at the larger batch before
  // its first step; a is re-planned between its steps. Same results, bitwise.
  set_compute_threads(2);
  auto a = build("resnet20", Shape{3, 16, 16}, 9), b = build("resnet20", Shape{3, 16, 16}, 9);
  auto oa = make_optimizer(a->params(), OptimizerConfig{});
  auto ob = make_optimizer(b->params(), OptimizerConfig{});
  const Tensor labels = labels_for(4);
  const Tensor big = random_batch(a->batch_shape(8), 50);
  b->net().forward(big, ForwardContext{false});
  for (int step = 0; step < 2; ++step) {
    const Tensor x = random_batch(a->batch_shape(4), 60 + static_cast<uint64_t>(step));
    train_step(*a, *oa, x, labels, false);
    train_step(*b, *ob, x, labels, false);
    INFO("step " << step);
    REQUIRE(bitwise_equal(a->params().values(), b->params().values()));
    const Tensor ea = Tensor::from_vector(Shape{8, 10}, a->net().forward(big, ForwardContext{false}).to_vector());
    const Tensor& eb = b->net().forward(big, ForwardContext{false});
    CHECK(bitwise_equal(ea, eb));
  }
  CHECK(a->net().arena()->generation() == 2);  // planned at 4, re-planned once at 8
  CHECK(b->net().arena()->generation() == 1);
  CHECK(a->net().arena()->capacity_elements() == b->net().arena()->capacity_elements());
}

TEST_CASE("the model's output is as forward left it after backward, whatever its last layer", "[scratch]") {
  // Backward takes gradients over activations whose backward is done; the
  // output (read after backward: accuracy, a user's metrics) must not be one
  // of them, also when the last layer shares an earlier layer's memory: a
  // ReLU fused into the Linear before it, an in-place Dropout, a Flatten view.
  set_compute_threads(1);
  for (const std::string tail : {"none", "relu", "dropout", "flatten"}) {
    INFO("last layer: " << tail);
    Sequential net;
    net.add(std::make_unique<Flatten>());
    net.add(std::make_unique<Linear>(12, 32));
    net.add(std::make_unique<ReLU>());
    net.add(std::make_unique<Linear>(32, 32));
    net.add(std::make_unique<ReLU>());
    net.add(std::make_unique<Linear>(32, 10));
    if (tail == "relu") net.add(std::make_unique<ReLU>());
    if (tail == "dropout") net.add(std::make_unique<Dropout>(0.25f));
    if (tail == "flatten") net.add(std::make_unique<Flatten>());
    Model m("tail", std::move(net), Shape{1, 2, 6}, 10, 3);
    const Tensor labels = labels_for(8);
    for (int step = 0; step < 2; ++step) {
      const Tensor& out = m.net().forward(random_batch(m.batch_shape(8), 40 + static_cast<uint64_t>(step)),
                                          ForwardContext{true, 5, step});
      const Tensor before = Tensor::from_vector(out.shape(), out.to_vector());
      m.net().arena()->poison(std::numeric_limits<float>::quiet_NaN());
      Tensor d = m.net().output_grad();
      softmax_cross_entropy_backward(out, labels, 1.f / 8.f, d);
      m.net().backward({});
      m.net().arena()->poison(std::nullopt);
      CHECK(bitwise_equal(out, before));
    }
  }
}

TEST_CASE("a fused residual join's branch allocates no output", "[scratch][residual]") {
  set_compute_threads(1);
  auto m = resnet20_planned(16);
  Sequential& net = m->net();
  auto* block = dynamic_cast<Residual*>(&net.layer(3));
  REQUIRE(block != nullptr);
  Sequential& branch = block->branch();
  const Shape in = net.shapes(m->batch_shape(2))[2];  // the block's input: layer 2's output
  const Shape out = block->output_shape(in);
  const int64_t joined = branch.activation_bytes();
  CHECK(joined > 0);
  // The same chain run on its own writes its last activation, so it plans memory for it.
  Tensor block_in = random_batch(in, 5);
  branch.forward(block_in, ForwardContext{});
  CHECK(branch.activation_bytes() == joined + out.numel() * static_cast<int64_t>(sizeof(float)));
}

TEST_CASE("a projection shortcut writes into its block's output and allocates none of its own", "[scratch][residual]") {
  set_compute_threads(1);
  auto m = resnet20_planned(16);
  Sequential& net = m->net();
  const std::vector<Shape> shapes = net.shapes(m->batch_shape(2));
  int projections = 0;
  for (size_t i = 0; i < net.size(); ++i) {
    auto* block = dynamic_cast<Residual*>(&net.layer(i));
    if (!block || block->shortcut().size() == 0) continue;
    ++projections;
    Sequential& shortcut = block->shortcut();
    REQUIRE(shortcut.output_overwritable());  // conv 1x1, then batch norm (no fused ReLU)
    const int64_t joined = shortcut.activation_bytes();
    const Shape& out = shapes[i];
    // Run on its own, the chain plans memory for its last activation too.
    shortcut.forward(random_batch(shapes[i - 1], 6), ForwardContext{});
    CHECK(shortcut.activation_bytes() == joined + out.numel() * static_cast<int64_t>(sizeof(float)));
  }
  CHECK(projections == 2);  // resnet20: the first block of stages 2 and 3
}

TEST_CASE("no layer reads what another left in the shared scratch", "[scratch]") {
  // Two identical models train on the same batches; one has its shared
  // scratch set to NaN before every forward and every backward. Any layer
  // that read stale scratch (a zero it never wrote, an earlier chain's
  // gradient) would turn its results to NaN or move them. resnet20 has
  // Winograd and im2col convolutions, identity and projection blocks, fused
  // joins; keras-cnn has pooling, dropout and a Linear head. Both layouts.
  for (const std::string name : {"resnet20", "keras-cnn"})
    for (const Layout layout : {Layout::NCHW, Layout::NHWC}) {
      INFO(name << " nhwc=" << (layout == Layout::NHWC));
      set_compute_threads(2);
      const Shape sample = name == "resnet20" ? Shape{3, 32, 32} : Shape{1, 28, 28};
      auto a = build(name, sample, 7), b = build(name, sample, 7);
      a->net().set_layout(layout);
      b->net().set_layout(layout);
      auto oa = make_optimizer(a->params(), OptimizerConfig{});
      auto ob = make_optimizer(b->params(), OptimizerConfig{});
      const Tensor labels = labels_for(4);
      for (int step = 0; step < 3; ++step) {
        const Tensor x = random_batch(a->batch_shape(4), 10 + static_cast<uint64_t>(step));
        train_step(*a, *oa, x, labels, false);
        train_step(*b, *ob, x, labels, true);
        INFO("step " << step);
        REQUIRE(bitwise_equal(a->params().grads(), b->params().grads()));
        REQUIRE(bitwise_equal(a->params().values(), b->params().values()));
        REQUIRE(bitwise_equal(a->buffers().values(), b->buffers().values()));
      }
    }
}
