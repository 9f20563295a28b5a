// ZeRO-1 across ranks: the reduce-scatter and the allgather of owned chunks
// compose to the ordered allreduce, over messages and through shared memory;
// a sharded DistributedOptimizer gives bitwise stage 0's parameters with 1/N
// of the state per rank, and its gathered state is stage 0's state.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "comm/ownership.h"
#include "comm/parameter_gather.h"
#include "comm/shm_allreduce.h"
#include "core/rng.h"
#include "mpi_batches.h"
#include "mpi_world.h"
#include "nn/loss.h"
#include "optim/distributed_optimizer.h"
#include "registry.h"

using namespace lockstep;
using lockstep::testing::contribution;
using lockstep::testing::make_batch;
using lockstep::testing::world;

namespace {

// Elements where a and b differ, counted over the elements `rank` owns (or all).
int64_t differing(const Tensor& a, const Tensor& b, int rank, int size, bool owned_only) {
  int64_t d = 0;
  auto count = [&](int64_t b0, int64_t e0) {
    for (int64_t i = b0; i < e0; ++i) d += a.data<float>()[i] != b.data<float>()[i];
  };
  if (owned_only)
    for_each_owned(0, a.numel(), rank, size, count);
  else
    count(0, a.numel());
  return d;
}

int64_t sum_over_ranks(Communicator& c, int64_t v) {
  Tensor t = Tensor::zeros(Shape{1}, DType::I64);
  t.data<int64_t>()[0] = v;
  c.allreduce(t, ReduceOp::Sum);
  return t.data<int64_t>()[0];
}

}  // namespace

TEST_CASE("reduce-scatter then allgather of owned chunks is the ordered allreduce, bitwise", "[mpi][zero]") {
  Communicator& c = world();
  for (int64_t n : {int64_t{1}, int64_t{7}, kReduceSegment + 3, 3 * kReduceSegment + 5}) {
    for (WireType wire : {WireType::F32, WireType::BF16}) {
      INFO("n " << n << " wire " << static_cast<int>(wire));
      Tensor want = contribution(n, c.rank(), 5);
      c.allreduce_sum_ordered(want, wire);
      Tensor t = contribution(n, c.rank(), 5);
      c.reduce_scatter_sum_ordered(t, wire);
      CHECK(differing(t, want, c.rank(), c.size(), true) == 0);
      c.allgather_owned(t);
      CHECK(differing(t, want, c.rank(), c.size(), false) == 0);
    }
  }
}

TEST_CASE("through shared memory: reduce_scatter then allgather is reduce, bitwise", "[mpi][zero]") {
  Communicator& c = world();
  const int64_t n = 2 * kReduceSegment + 11;
  std::shared_ptr<SharedMemory> mem = c.allocate_shared(ShmAllreduce::kHeaderBytes + n * 4);
  if (!mem) {
    WARN("the ranks span hosts: no shared memory to test");
    return;
  }
  ShmAllreduce shm(mem, c.rank());
  Tensor want = contribution(n, c.rank(), 9);
  c.allreduce_sum_ordered(want, WireType::F32);
  Tensor mine = contribution(n, c.rank(), 9);
  std::copy_n(mine.data<float>(), n, shm.data(c.rank()));
  shm.reduce_scatter(0, n);
  Tensor got = Tensor::zeros(Shape{n});
  std::copy_n(shm.data(c.rank()), n, got.data<float>());
  CHECK(differing(got, want, c.rank(), c.size(), true) == 0);
  shm.allgather(0, n);
  std::copy_n(shm.data(c.rank()), n, got.data<float>());
  CHECK(differing(got, want, c.rank(), c.size(), false) == 0);
  shm.wait_readers();
}

TEST_CASE("ZeRO-1: stage 0's parameters bitwise, 1/N of the state, gathered state equal", "[mpi][zero]") {
  Communicator& c = world();
  for (const char* optimizer : {"sgd", "adam"})
    for (bool shared : {true, false})
      for (bool overlap : {true, false})
        for (float clip : {0.f, 1e-3f}) {
          INFO(optimizer << (shared ? " shared memory" : " messages") << (overlap ? " overlap" : "")
                         << " clip " << clip);
          OptimizerConfig oc;
          oc.name = optimizer;
          oc.weight_decay = 1e-3f;
          // Stage 0; stage 1; stage 1 with the allgather left running for the
          // next forward, which waits layer by layer.
          constexpr int kRuns = 3;
          std::unique_ptr<Model> m[kRuns];
          std::unique_ptr<Optimizer> opt[kRuns];
          std::unique_ptr<DistributedOptimizer> d[kRuns];
          for (int z = 0; z < kRuns; ++z) {
            m[z] = models::build_model("lenet", {}, 3);
            opt[z] = make_optimizer(m[z]->params(), oc);
            DistributedOptions o;
            o.bucket_bytes = 64 << 10;  // several buckets
            o.first_bucket_bytes = 16 << 10;
            o.shared_memory = shared;
            o.overlap = overlap;
            o.max_grad_norm = clip;
            o.zero_stage = z > 0;
            o.gather_during_forward = z == 2;
            d[z] = std::make_unique<DistributedOptimizer>(*opt[z], m[z]->params(), c, o);
            DistributedOptimizer* dz = d[z].get();
            m[z]->net().set_grad_ready_hook([dz](int64_t end) { dz->on_gradients_ready(end); });
            m[z]->net().set_parameter_wait_hook([dz](int64_t from) { dz->wait_parameters(from); });
            d[z]->broadcast_state(0);
          }
          REQUIRE(d[1]->sharded());
          CHECK(sum_over_ranks(c, opt[1]->state_numel()) == m[1]->params().padded_numel());
          CHECK((d[2]->describe().find("overlapped with the next forward") != std::string::npos) ==
                (overlap && c.size() > 1));
          for (int step = 0; step < 4; ++step) {
            Tensor x, y;
            const uint64_t key = rng_key(7, static_cast<uint64_t>(c.rank()), static_cast<uint64_t>(step));
            for (int z = 0; z < kRuns; ++z) {
              make_batch(key, 8, x, y);
              d[z]->begin_backward(true);
              const Tensor& logits = m[z]->net().forward(x, ForwardContext{});
              Tensor g = m[z]->net().output_grad();
              softmax_cross_entropy_backward(logits, y, 1.f / 8, g);
              m[z]->net().backward({});
              d[z]->step(0.01f);
            }
          }
          for (int z = 1; z < kRuns; ++z) {
            d[z]->wait_parameters();
            CHECK(differing(m[z]->params().values(), m[0]->params().values(), 0, 1, false) == 0);
            if (clip > 0.f) CHECK(d[z]->clipped_steps() == 4);
          }
          // The gathered state, on rank 0 only, is stage 0's.
          const auto s0 = d[0]->gather_state(), s1 = d[1]->gather_state(), s2 = d[2]->gather_state();
          REQUIRE(s0.size() == opt[0]->state().size());
          if (c.rank() != 0) {
            CHECK(s1.empty());
            CHECK(s2.empty());
            continue;
          }
          REQUIRE(s0.size() == s1.size());
          REQUIRE(s0.size() == s2.size());
          for (size_t k = 0; k < s0.size(); ++k) {
            CHECK(differing(s1[k].second, s0[k].second, 0, 1, false) == 0);
            CHECK(differing(s2[k].second, s0[k].second, 0, 1, false) == 0);
          }
        }
}

TEST_CASE("ParameterGather: forward-order ranges; wait_from returns only once they have arrived", "[mpi][zero]") {
  Communicator& c = world();
  // Three buckets: the last spans several gather pieces, with a short tail.
  constexpr int64_t piece = ParameterGather::kGatherSegments * kReduceSegment;
  const std::vector<ElementRange> buckets = {{0, 1000}, {1000, 1000 + piece / 2}, {1000 + piece / 2, 1000 + 3 * piece + 77}};
  const int64_t n = buckets.back().end;
  auto value = [](int64_t i) { return static_cast<float>(i % 1009) * 0.25f + 1.f; };
  for (bool shared : {false, true})
    for (bool overlap : {true, false}) {
      INFO((shared ? "shared memory" : "messages") << (overlap ? ", overlap" : ""));
      std::shared_ptr<SharedMemory> mem = shared ? c.allocate_shared(ShmAllreduce::kHeaderBytes + n * 4) : nullptr;
      if (shared && !mem) {
        WARN("the ranks span hosts: no shared memory to test");
        continue;
      }
      std::unique_ptr<ShmAllreduce> shm = mem ? std::make_unique<ShmAllreduce>(mem, c.rank()) : nullptr;
      Tensor values = Tensor::zeros(Shape{n});
      float* v = shm ? shm->data(c.rank()) : values.data<float>();
      std::fill_n(v, n, -1.f);  // stale everywhere but where this rank owns
      for (const ElementRange& b : buckets)
        for_each_owned(b.begin, b.end, c.rank(), c.size(), [&](int64_t lo, int64_t hi) {
          for (int64_t i = lo; i < hi; ++i) v[i] = value(i);
        });
      auto arrived_from = [&](int64_t from) {  // elements >= from that hold their value
        int64_t bad = 0;
        for (int64_t i = from; i < n; ++i) bad += v[i] != value(i);
        return bad;
      };
      {
        // The store's tensor over this rank's block, as DistributedOptimizer makes it.
        Tensor over = shm ? Tensor::zeros(Shape{n}, DType::F32,
                                          std::make_shared<BorrowedAllocator>(v, static_cast<size_t>(n) * 4, mem))
                          : values;
        ParameterGather g(c, over, buckets, {overlap, nullptr, nullptr, shm.get()});
        const auto& r = g.ranges();
        REQUIRE(r.size() == 1 + 1 + 3);
        for (size_t k = 0; k < r.size(); ++k) {  // descending, contiguous, whole segments from a bucket's start
          CHECK(r[k].end == (k == 0 ? n : r[k - 1].begin));
          CHECK(r[k].numel() <= piece);
        }
        CHECK(r.back().begin == 0);
        CHECK(r[0].numel() == piece / 2 + 77);  // the tail piece of the last bucket
        CHECK(g.overlapping() == (overlap && c.size() > 1));
        // The last rank starts late: the others' gathers must wait for it.
        if (c.rank() == c.size() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        g.start();
        for (size_t k = 0; k < r.size(); ++k) {
          g.wait_from(r[k].begin);
          CHECK(arrived_from(r[k].begin) == 0);
        }
        g.wait();
        CHECK(arrived_from(0) == 0);
        g.start();  // a second gather of the same values changes nothing
        g.wait();
        CHECK(arrived_from(0) == 0);
      }
      if (shm) shm->wait_readers();
      c.barrier();
    }
}
