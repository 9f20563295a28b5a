// Gradient buckets across ranks: identical plans, bitwise-identical results
// for overlap on/off and any bucket threshold, accumulation, 16-bit wires.
#include <catch2/catch.hpp>

#include <cstring>

#include "comm/grad_reducer.h"
#include "comm/ordered_allreduce.h"
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

bool same_on_all_ranks(Communicator& c, uint64_t h) {
  Tensor v = Tensor::zeros(Shape{1}, DType::I64);
  v.data<int64_t>()[0] = static_cast<int64_t>(h >> 1);
  Tensor all = Tensor::zeros(Shape{c.size()}, DType::I64);
  c.allgather(v, all);
  for (int64_t x : all.span<int64_t>())
    if (x != all.data<int64_t>()[0]) return false;
  return true;
}

// Trains `steps` steps of lenet on per-rank data through the distributed
// optimizer with the grad-ready hook wired as the trainer does; returns the
// parameters.
std::vector<float> train(Communicator& c, DistributedOptions o, int steps, int micro = 1, int64_t batch = 8) {
  auto m = models::build_model("lenet", {}, 11);
  OptimizerConfig oc;
  oc.momentum = 0.9f;
  auto opt = make_optimizer(m->params(), oc);
  DistributedOptimizer d(*opt, m->params(), c, o);
  m->net().set_grad_ready_hook([&](int64_t end) { d.on_gradients_ready(end); });
  d.broadcast_state(0);
  for (int s = 0; s < steps; ++s) {
    for (int k = 0; k < micro; ++k) {
      Tensor x, y;
      make_batch(rng_key(3, static_cast<uint64_t>(c.rank()), static_cast<uint64_t>(s * micro + k)), batch, x, y);
      const Tensor& logits = m->net().forward(x, {});
      Tensor g = m->net().output_grad();
      softmax_cross_entropy_backward(logits, y, 1.f / static_cast<float>(batch * micro), g);
      d.begin_backward(k == micro - 1);
      m->net().backward(BackwardContext{k > 0});
    }
    d.step(0.05f);
  }
  return m->params().values().to_vector();
}

}  // namespace

TEST_CASE("bucket plans are identical on every rank", "[mpi][buckets]") {
  Communicator& c = world();
  auto m = models::build_model("convnet", {}, static_cast<uint64_t>(c.rank()));  // weights differ; layout does not
  for (int64_t cap : {int64_t{1}, int64_t{64} << 10, int64_t{25} << 20}) {
    const auto plan = plan_buckets(m->params(), cap, int64_t{1} << 20);
    std::string text;
    for (const auto& b : plan) text += std::to_string(b.begin) + "-" + std::to_string(b.end) + ";";
    CHECK(same_on_all_ranks(c, fnv1a(text)));
  }
}

TEST_CASE("make_grad_reducer: host gradients summed in place bucket by bucket, scaled by 1/N", "[mpi][buckets]") {
  Communicator& c = world();
  const int n = c.size();
  const int64_t len = 5000;
  const std::vector<Bucket> plan{{0, 1000}, {1000, 4096}, {4096, len}};
  for (bool overlap : {false, true})
    for (bool average : {true, false}) {
      INFO("overlap " << overlap << ", average " << average);
      Tensor grads = Tensor::zeros(Shape{len});
      GradReducerSetup setup;
      setup.grads = grads;
      setup.buckets = plan;
      setup.overlap = overlap;
      setup.average = average;
      std::unique_ptr<GradReducer> r = make_grad_reducer(c, std::move(setup));
      CHECK(r->overlapping() == (overlap && n > 1));
      CHECK(r->buckets().size() == plan.size());
      CHECK(r->grad_scale() == (average ? 1.f / static_cast<float>(n) : 1.f));
      CHECK(r->describe().find(c.backend()) != std::string::npos);
      for (int step = 0; step < 2; ++step) {  // two rounds: the worker starts again from the first bucket
        r->quiesce();
        r->arm();
        float* g = grads.data<float>();
        for (int64_t i = 0; i < len; ++i) g[i] = static_cast<float>(c.rank() + 1) * static_cast<float>(i % 7 + step);
        for (const Bucket& b : plan) r->ready(b.end);  // backward order: every bucket final in turn
        r->finish();
        const float ranks = static_cast<float>(n * (n + 1) / 2);  // 1 + 2 + ... + n
        int64_t wrong = 0;
        for (int64_t i = 0; i < len; ++i) wrong += g[i] != ranks * static_cast<float>(i % 7 + step);
        CHECK(wrong == 0);
      }
    }
}

TEST_CASE("overlap on or off and any threshold give bitwise the same training", "[mpi][buckets]") {
  Communicator& c = world();
  std::vector<std::vector<float>> results;
  for (bool overlap : {false, true})
    for (int64_t cap : {int64_t{1}, int64_t{48} << 10, int64_t{25} << 20}) {  // 1 byte: one bucket per tensor
      DistributedOptions o;
      o.overlap = overlap;
      o.bucket_bytes = cap;
      o.first_bucket_bytes = cap == 1 ? 0 : int64_t{8} << 10;
      results.push_back(train(c, o, 4));
    }
  for (size_t i = 1; i < results.size(); ++i) {
    INFO("configuration " << i);
    CHECK(std::memcmp(results[i].data(), results[0].data(), results[0].size() * sizeof(float)) == 0);
  }
  Tensor t = Tensor::from_vector(Shape{static_cast<int64_t>(results[0].size())}, results[0]);
  CHECK(same_on_all_ranks(c, hash_bytes(t)));
}

TEST_CASE("shared memory and message passing give bitwise the same sums", "[mpi][buckets]") {
  Communicator& c = world();
  std::vector<std::vector<float>> results;
  for (bool shm : {true, false})
    for (bool overlap : {true, false}) {
      DistributedOptions o;
      o.shared_memory = shm;
      o.overlap = overlap;
      o.bucket_bytes = int64_t{48} << 10;
      o.first_bucket_bytes = int64_t{8} << 10;
      results.push_back(train(c, o, 4, 2));  // with accumulation, so backward writes gradients twice per step
    }
  for (size_t i = 1; i < results.size(); ++i)
    CHECK(std::memcmp(results[i].data(), results[0].data(), results[0].size() * sizeof(float)) == 0);
}

TEST_CASE("K micro-batches accumulate to one batch K times larger", "[mpi][buckets]") {
  Communicator& c = world();
  // Same samples: K=4 micro-batches of 4 vs one batch of 16 made of the same keys.
  auto big = models::build_model("lenet", {}, 11);
  auto small = models::build_model("lenet", {}, 11);
  OptimizerConfig oc;
  auto ob = make_optimizer(big->params(), oc);
  auto os = make_optimizer(small->params(), oc);
  DistributedOptimizer db(*ob, big->params(), c), ds(*os, small->params(), c);
  Tensor x, y;
  make_batch(rng_key(5, static_cast<uint64_t>(c.rank())), 16, x, y);
  const Tensor& lb = big->net().forward(x, {});
  Tensor gb = big->net().output_grad();
  softmax_cross_entropy_backward(lb, y, 1.f / 16, gb);
  db.begin_backward(true);
  big->net().backward({});
  db.step(0.1f);
  for (int k = 0; k < 4; ++k) {
    Tensor xs = x.slice(k * 4 * 784, Shape{4, 1, 28, 28});
    Tensor ys = y.slice(k * 4, Shape{4});
    const Tensor& l = small->net().forward(xs, {});
    Tensor g = small->net().output_grad();
    softmax_cross_entropy_backward(l, ys, 1.f / 16, g);
    ds.begin_backward(k == 3);
    small->net().backward(BackwardContext{k > 0});
  }
  ds.step(0.1f);
  const auto a = big->params().values().to_vector(), b = small->params().values().to_vector();
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::abs(a[i])));
  }
  INFO("max abs difference " << worst << " of max magnitude " << scale);
  CHECK(worst <= 1e-6 * scale);
}

TEST_CASE("16-bit wires stay within their rounding of the fp32 sums", "[mpi][buckets]") {
  Communicator& c = world();
  const int64_t n = 100003;
  Tensor ref = Tensor::zeros(Shape{n});
  Rng rng(rng_key(17, static_cast<uint64_t>(c.rank())));
  for (float& v : ref.span<float>()) v = rng.normal() * 1e-2f;
  // Tolerances relative to the largest sum: each of the N contributions and the
  // result are rounded once (fp16: 2^-11, bf16: 2^-8 relative), so at most
  // (N + 1) roundings; stated bounds: fp16 2e-3, bf16 2e-2 (N <= 4).
  for (auto [wire, tol] : {std::pair{WireType::F16, 2e-3}, std::pair{WireType::BF16, 2e-2}}) {
    Tensor exact = Tensor::zeros(ref.shape()), wide = Tensor::zeros(ref.shape());
    exact.copy_from(ref);
    wide.copy_from(ref);
    c.allreduce_sum_ordered(exact, WireType::F32);
    c.allreduce_sum_ordered(wide, wire);
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < n; ++i) {
      worst = std::max(worst, static_cast<double>(std::abs(exact.data<float>()[i] - wide.data<float>()[i])));
      scale = std::max(scale, static_cast<double>(std::abs(exact.data<float>()[i])));
    }
    INFO((wire == WireType::F16 ? "fp16" : "bf16") << ": max abs difference " << worst << " of " << scale);
    CHECK(worst <= tol * scale);
    CHECK(worst > 0);  // it really went through 16 bits
    CHECK(same_on_all_ranks(c, hash_bytes(wide)));
  }
  // And through the optimizer: replicas stay identical with compression.
  DistributedOptions o;
  o.wire = WireType::BF16;
  const auto p = train(c, o, 3);
  Tensor t = Tensor::from_vector(Shape{static_cast<int64_t>(p.size())}, p);
  CHECK(same_on_all_ranks(c, hash_bytes(t)));
}

TEST_CASE("ordered allreduce: closed forms and any split", "[mpi][buckets]") {
  Communicator& c = world();
  const int r = c.rank(), N = c.size();
  for (int64_t n : {1, 2, 3, 7, 1000, 1 << 18}) {
    Tensor t = Tensor::zeros(Shape{n});
    for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(r + i % 13);
    c.allreduce_sum_ordered(t, WireType::F32);
    bool ok = true;
    for (int64_t i = 0; i < n; ++i) ok = ok && t.data<float>()[i] == static_cast<float>(N * (i % 13) + N * (N - 1) / 2);
    CHECK(ok);
  }
  // Non-integers: one call on the whole buffer equals many calls on pieces, bitwise.
  Tensor whole = Tensor::zeros(Shape{5000}), parts = Tensor::zeros(Shape{5000});
  Rng rng(rng_key(23, static_cast<uint64_t>(r)));
  for (int64_t i = 0; i < 5000; ++i) whole.data<float>()[i] = parts.data<float>()[i] = rng.normal();
  c.allreduce_sum_ordered(whole, WireType::F32);
  for (int64_t off = 0, len = 1; off < 5000; off += len, len = len * 3 % 701 + 1) {
    Tensor piece = parts.slice(off, Shape{std::min<int64_t>(len, 5000 - off)});
    c.allreduce_sum_ordered(piece, WireType::F32);
  }
  CHECK(std::memcmp(whole.raw_data(), parts.raw_data(), whole.nbytes()) == 0);
}

TEST_CASE("ordered allreduce: many segments, every wire", "[mpi][buckets]") {
  Communicator& c = world();
  const int r = c.rank(), N = c.size();
  constexpr int64_t seg = OrderedAllreduce::kSegment;
  // One segment and one element, whole segments, and a ragged last one.
  for (int64_t n : {seg + 1, 4 * seg, 6 * seg + 777}) {
    // Small integers: exact in fp32, bf16 and fp16, so every wire gives the
    // closed form (N <= 4: sums up to 54).
    for (WireType wire : {WireType::F32, WireType::BF16, WireType::F16}) {
      Tensor t = Tensor::zeros(Shape{n});
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(r + (i * 7 + i / seg) % 13);
      c.allreduce_sum_ordered(t, wire);
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i)
        wrong += t.data<float>()[i] != static_cast<float>(N * ((i * 7 + i / seg) % 13) + N * (N - 1) / 2);
      INFO("n " << n << " wire " << static_cast<int>(wire) << ": " << wrong << " wrong");
      CHECK(wrong == 0);
    }
  }
  // Non-integers across segments: one call equals calls on pieces that cut
  // segments anywhere, bitwise.
  const int64_t n = 3 * seg + 5;
  Tensor whole = Tensor::zeros(Shape{n}), parts = Tensor::zeros(Shape{n});
  Rng rng(rng_key(29, static_cast<uint64_t>(r)));
  for (int64_t i = 0; i < n; ++i) whole.data<float>()[i] = parts.data<float>()[i] = rng.normal();
  c.allreduce_sum_ordered(whole, WireType::F32);
  for (int64_t off = 0, len = seg / 3; off < n; off += len, len = len * 5 % (2 * seg) + 1) {
    Tensor piece = parts.slice(off, Shape{std::min<int64_t>(len, n - off)});
    c.allreduce_sum_ordered(piece, WireType::F32);
  }
  CHECK(std::memcmp(whole.raw_data(), parts.raw_data(), whole.nbytes()) == 0);
}
