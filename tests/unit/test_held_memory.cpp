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

// The headroom the arena keeps above a plain chain's activations (fp32), as
// nn/activation_arena.h plans it: the activations in layer order (256-byte
// aligned; the model's output apart), then backward takes the
// output's gradient above everything and, at each layer k that writes a
// gradient of its own, dx (shaped like activation k - 1) at the lowest place
// above activation k that no gradient still held overlaps.
int64_t planned_headroom_bytes(const Sequential& net, const Shape& in) {
  const std::vector<Shape> shapes = net.shapes(in);
  const std::vector<Aliasing>& aliasing = net.planned_aliasing();
  const size_t n = shapes.size();
  auto align = [](int64_t e) { return (e + 63) / 64 * 64; };
  size_t output_owner = n;  // the layer whose memory the output is, kept apart
  for (size_t i = n; i-- > 0 && output_owner == n;)
    if (aliasing[i] == Aliasing::None) output_owner = i;
  std::vector<int64_t> end(n);
  int64_t mark = 0;
  for (size_t i = 0; i < n; ++i) {
    if (aliasing[i] == Aliasing::None && i != output_owner) mark = align(mark + shapes[i].numel());
    end[i] = mark;
  }
  std::vector<std::pair<int64_t, int64_t>> held;  // offset, elements
  int64_t top = 0;
  auto take = [&](int64_t numel, int64_t boundary) {
    std::sort(held.begin(), held.end());
    int64_t at = align(boundary);
    for (const auto& [off, len] : held)
      if (off < at + numel && at < off + len) at = align(off + len);
    held.emplace_back(at, numel);
    top = std::max(top, at + numel);
    return at;
  };
  int64_t dy = take(shapes[n - 1].numel(), end[n - 1]);
  for (size_t k = n; k-- > 1;)
    if (aliasing[k] == Aliasing::None) {
      const int64_t dx = take(shapes[k - 1].numel(), end[k]);
      std::erase_if(held, [&](const auto& h) { return h.first == dy; });
      dy = dx;
    }
  return std::max<int64_t>(0, top - mark) * 4;
}

}  // namespace

TEST_CASE("a model's held memory is its stores, its planned activations and the gradients' headroom", "[memory]") {
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
  // The gradients go where activations whose backward is done were, and above them.
  const int64_t headroom = planned_headroom_bytes(m->net(), in);
  CHECK(held.layers.activation_gradients == headroom);
  CHECK(headroom < held.layers.activations);
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

TEST_CASE("resnet50's activation gradients live mostly in the memory of activations already done", "[memory]") {
  // Gradients held for the whole run would be two per chain depth and a
  // shortcut's, each as large as the largest activation there: at 64x64 that
  // is about 4.4 MiB a sample. In the arena only what does not fit in dead
  // activations is extra: the start of backward, where the gradients are small.
  auto m = build("resnet50", Shape{3, 64, 64});
  const int64_t batch = 2;
  forward_backward(*m, batch);
  const Model::MemoryHeld held = m->memory_held();
  // Stage 1's output, [2, 256, 16, 16] fp32 (the stem's is as large).
  const int64_t largest = batch * 256 * 16 * 16 * 4;
  INFO("activations " << held.layers.activations << " B, gradients' headroom " << held.layers.activation_gradients
                      << " B");
  CHECK(held.layers.activation_gradients > 0);
  CHECK(held.layers.activation_gradients < largest);
}
