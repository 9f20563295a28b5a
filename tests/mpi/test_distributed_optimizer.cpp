// DistributedOptimizer across ranks: replicas stay bitwise identical, and N
// ranks averaging shard gradients equal one process on the whole batch.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "core/hash.h"
#include "core/rng.h"
#include "mpi_batches.h"
#include "mpi_world.h"
#include "nn/loss.h"
#include "optim/distributed_optimizer.h"
#include "registry.h"

using namespace lockstep;
using lockstep::testing::make_batch;
using lockstep::testing::world;

namespace {

uint64_t hash_bytes(const Tensor& t) {
  return fnv1a(std::string_view(static_cast<const char*>(t.raw_data()), t.nbytes()));
}

// True when every rank's tensor has the same bytes.
bool identical_across_ranks(Communicator& c, const Tensor& t) {
  Tensor h = Tensor::zeros(Shape{1}, DType::I64);
  h.data<int64_t>()[0] = static_cast<int64_t>(hash_bytes(t) >> 1);
  Tensor mn = Tensor::zeros(Shape{1}, DType::I64), mx = Tensor::zeros(Shape{1}, DType::I64);
  mn.copy_from(h);
  mx.copy_from(h);
  c.allreduce(mn, ReduceOp::Min);
  c.allreduce(mx, ReduceOp::Max);
  return mn.data<int64_t>()[0] == mx.data<int64_t>()[0];
}

void forward_backward(Model& m, const Tensor& x, const Tensor& y, float scale) {
  const Tensor& logits = m.net().forward(x, ForwardContext{});
  Tensor d = m.net().output_grad();
  softmax_cross_entropy_backward(logits, y, scale, d);
  m.net().backward({});
}

}  // namespace

TEST_CASE("broadcast_state makes every replica rank 0's", "[mpi]") {
  Communicator& c = world();
  auto m = models::build_model("lenet", {}, 1);
  auto opt = make_optimizer(m->params(), OptimizerConfig{});
  // Diverge the replicas on purpose.
  for (float& v : m->params().values().span<float>()) v += 0.01f * static_cast<float>(c.rank());
  opt->set_steps(c.rank());
  DistributedOptimizer d(*opt, m->params(), c);
  CHECK_FALSE(identical_across_ranks(c, m->params().values()));
  d.broadcast_state(0);
  CHECK(identical_across_ranks(c, m->params().values()));
  CHECK(identical_across_ranks(c, *opt->state()[0].second));
  CHECK(opt->steps() == 0);
}

TEST_CASE("replicas stay bitwise identical over steps on different data", "[mpi]") {
  Communicator& c = world();
  for (const char* optimizer : {"sgd", "adam"}) {
    auto m = models::build_model("lenet", {}, 3);
    OptimizerConfig oc;
    oc.name = optimizer;
    auto opt = make_optimizer(m->params(), oc);
    DistributedOptions o;
    o.bucket_bytes = 64 << 10;  // several buckets
    DistributedOptimizer d(*opt, m->params(), c, o);
    d.broadcast_state(0);
    const std::vector<float> before = m->params().values().to_vector();
    for (int step = 0; step < 5; ++step) {
      Tensor x, y;
      make_batch(rng_key(7, static_cast<uint64_t>(c.rank()), static_cast<uint64_t>(step)), 8, x, y);
      forward_backward(*m, x, y, 1.f / 8);
      CHECK_FALSE(identical_across_ranks(c, m->params().grads()));  // local gradients differ
      d.step(0.01f);
    }
    CHECK(identical_across_ranks(c, m->params().values()));
    CHECK(identical_across_ranks(c, *opt->state()[0].second));
    CHECK(m->params().values().to_vector() != before);
  }
}

TEST_CASE("averaged shard gradients equal the whole batch's gradient", "[mpi]") {
  Communicator& c = world();
  const int n = c.size();
  const int64_t per_rank = 4, global = per_rank * n;
  Tensor x, y;
  make_batch(99, global, x, y);  // every rank makes the whole global batch
  // One process on the whole batch (every rank computes it, for comparison).
  auto whole = models::build_model("mlp", {}, 5);
  forward_backward(*whole, x, y, 1.f / static_cast<float>(global));
  // This rank's shard, then the distributed average; lr 0 leaves parameters alone.
  auto m = models::build_model("mlp", {}, 5);
  Tensor xs = x.slice(c.rank() * per_rank * 784, Shape{per_rank, 1, 28, 28});
  Tensor ys = y.slice(c.rank() * per_rank, Shape{per_rank});
  forward_backward(*m, xs, ys, 1.f / static_cast<float>(per_rank));
  Tensor g = Tensor::zeros(m->params().grads().shape());
  g.copy_from(m->params().grads());
  c.allreduce(g, ReduceOp::Average);
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(g.data<float>()[i] - whole->params().grads().data<float>()[i])));
    scale = std::max(scale, static_cast<double>(std::abs(whole->params().grads().data<float>()[i])));
  }
  INFO("max abs difference " << worst << " of max magnitude " << scale);
  CHECK(worst <= 1e-6 * std::max(scale, 1.0));
}

TEST_CASE("clipping: every rank finds the averaged gradient's norm, and replicas stay identical", "[mpi][clip]") {
  Communicator& c = world();
  auto m = models::build_model("lenet", {}, 3);
  OptimizerConfig oc;
  auto opt = make_optimizer(m->params(), oc);
  DistributedOptions o;
  o.bucket_bytes = 64 << 10;
  o.max_grad_norm = 1e-3f;  // below every step's norm: each update is clipped
  DistributedOptimizer d(*opt, m->params(), c, o);
  d.broadcast_state(0);
  for (int step = 0; step < 4; ++step) {
    Tensor x, y;
    make_batch(rng_key(11, static_cast<uint64_t>(c.rank()), static_cast<uint64_t>(step)), 8, x, y);
    forward_backward(*m, x, y, 1.f / 8);
    // The expected norm: this rank's gradients averaged apart from the optimizer's buffers.
    Tensor g = Tensor::zeros(m->params().grads().shape());
    g.copy_from(m->params().grads());
    c.allreduce(g, ReduceOp::Average);
    double sumsq = 0;
    for (float v : g.span<float>()) sumsq += static_cast<double>(v) * v;
    d.step(0.01f);
    INFO("step " << step + 1);
    CHECK(d.last_grad_norm() == Approx(std::sqrt(sumsq)).epsilon(1e-5));
    Tensor norm = Tensor::zeros(Shape{1});
    norm.data<float>()[0] = d.last_grad_norm();
    CHECK(identical_across_ranks(c, norm));
  }
  CHECK(d.clipped_steps() == 4);
  CHECK(identical_across_ranks(c, m->params().values()));
  CHECK(identical_across_ranks(c, *opt->state()[0].second));
}
