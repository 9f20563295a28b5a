// What a model holds between steps (Model::memory_held, Module::held_memory):
// each figure against the memory plan it should come from, computed here from
// the planned shapes and aliasing, not from the tensors the figure sums.
#include <catch2/catch.hpp>

#include <algorithm>

#include "nn/layers.h"
#include "nn/residual.h"
#include "registry.h"

using namespace lockstep;

namespace {

std::unique_ptr<Model> build(const std::string& name, Shape sample) {
  return models::build_model(name, models::ModelSpec{sample, 10}, 1);
}

void forward_backward(Model& m, int64_t batch) {
  Tensor x = Tensor::zeros(m.batch_shape(batch));
  ForwardContext fctx;
  m.net().forward(x, fctx);
  Tensor dy = m.net().output_grad();
  dy.fill(0.01f);
  m.net().backward(BackwardContext{});
}

// Bytes of the outputs a chain's plan gives memory of its own (fp32): the
// layers planned with no aliasing.
int64_t planned_output_bytes(const Sequential& net, const Shape& in) {
  const std::vector<Shape> shapes = net.shapes(in);
  int64_t b = 0;
  for (size_t i = 0; i < net.size(); ++i)
    if (net.planned_aliasing()[i] == Aliasing::None) b += shapes[i].numel() * 4;
  return b;
}

}  // namespace

TEST_CASE("a model's held memory is its stores, its planned activations and two gradient buffers", "[memory]") {
  auto m = build("convnet", Shape{1, 28, 28});
  Model::MemoryHeld before = m->memory_held();
  CHECK(before.parameters == m->params().padded_numel() * 4);
  CHECK(before.gradients == m->params().padded_numel() * 4);
  CHECK(before.buffers == 0);  // convnet has no batch norm
  CHECK(before.layers.activations == 0);  // nothing planned before the first forward

  const int64_t batch = 8;
  forward_backward(*m, batch);
  const Model::MemoryHeld held = m->memory_held();
  const Shape in = m->batch_shape(batch);
  CHECK(held.layers.activations == planned_output_bytes(m->net(), in));
  // The chain's two gradient buffers: the first holds the output's gradient, then they take
  // turns at each layer that writes a gradient of its own, layer k's shaped like activation k - 1.
  const std::vector<Shape> planned = m->net().shapes(in);
  int64_t need[2] = {planned.back().numel(), 1};
  int turn = 0;
  for (size_t k = planned.size(); k-- > 1;)
    if (m->net().planned_aliasing()[k] == Aliasing::None) {
      turn ^= 1;
      need[turn] = std::max(need[turn], planned[k - 1].numel());
    }
  CHECK(held.layers.activation_gradients == (need[0] + need[1]) * 4);
  // Max pooling keeps an int32 argmax per output element; the convolutions' buffers come on top.
  int64_t argmax = 0;
  const std::vector<Shape> shapes = m->net().shapes(in);
  for (size_t i = 0; i < m->net().size(); ++i)
    if (m->net().layer(i).describe().rfind("MaxPool", 0) == 0) argmax += shapes[i].numel() * 4;
  REQUIRE(argmax > 0);
  CHECK(held.layers.scratch > argmax);
  CHECK(held.total() == held.parameters + held.gradients + held.buffers + held.layers.activations +
                            held.layers.activation_gradients + held.layers.scratch);

  // A larger batch grows the plan; a smaller one keeps it (memory is never given back mid-run).
  forward_backward(*m, 2 * batch);
  CHECK(m->memory_held().layers.activations == planned_output_bytes(m->net(), m->batch_shape(2 * batch)));
  forward_backward(*m, batch);
  CHECK(m->memory_held().layers.activations == planned_output_bytes(m->net(), m->batch_shape(2 * batch)));
}

TEST_CASE("a ResNet's held activations include every residual block's chains", "[memory]") {
  auto m = build("resnet20", Shape{3, 32, 32});
  const int64_t batch = 4;
  forward_backward(*m, batch);
  const Model::MemoryHeld held = m->memory_held();
  int64_t chains = m->net().activation_bytes();
  int64_t blocks = 0;
  for (size_t i = 0; i < m->net().size(); ++i)
    if (auto* r = dynamic_cast<Residual*>(&m->net().layer(i))) {
      chains += r->branch().activation_bytes() + r->shortcut().activation_bytes();
      ++blocks;
    }
  REQUIRE(blocks > 0);
  CHECK(held.layers.activations == chains);
  CHECK(held.layers.activations > m->net().activation_bytes());
  // Batch norm's running statistics are the buffer store's.
  CHECK(held.buffers == static_cast<int64_t>(m->buffers().values().nbytes() + m->buffers().grads().nbytes()));
  CHECK(held.buffers > 0);
}

TEST_CASE("a bottleneck's narrow gradients take the smaller of its chain's two buffers", "[memory]") {
  auto m = build("resnet50", Shape{3, 32, 32});
  forward_backward(*m, 2);
  // Depth 1 holds the blocks' chains. In a bottleneck (1x1 narrowing, 3x3, 1x1 widening by 4) the
  // turns put the widened gradients in one buffer and the narrow ones in the other, and a chain
  // whose output is its caller's (the joined branch, the shortcut written into the block's
  // output) takes its output's gradient from the caller: so the buffers differ in size.
  const SharedScratch& s = *m->net().scratch();
  const int64_t a = s.buffer(1, SharedScratch::kGradA).numel(), b = s.buffer(1, SharedScratch::kGradB).numel();
  INFO("depth-1 gradient buffers: " << a << " and " << b << " elements");
  CHECK(2 * a <= b);
}
