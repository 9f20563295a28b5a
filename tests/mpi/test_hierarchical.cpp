// The hierarchical allreduce (comm/hierarchical_allreduce.h) on hosts emulated
// by grouping consecutive ranks: bitwise the flat ordered allreduce's sums, and
// ZeRO-1's halves the flat halves, on their own and under a
// DistributedOptimizer (stages 0 and 1). Real hosts: tests/cluster.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <algorithm>
#include <cstring>

#include "comm/mpi_communicator.h"
#include "comm/ownership.h"
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

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// The groupings of this world into at least 2 emulated hosts of at least 2 ranks.
std::vector<int> groupings(int size) {
  std::vector<int> out;
  for (int per_host = 2; per_host <= size / 2; ++per_host)
    if (size % per_host == 0) out.push_back(per_host);
  return out;
}

}  // namespace

TEST_CASE("hierarchical allreduce: only where the ranks make several hosts of several", "[mpi][hierarchical]") {
  const int size = world().size();
  for (int per_host = 1; per_host <= size; ++per_host) {
    MpiCommunicator c(MPI_COMM_WORLD, per_host);
    const bool can = per_host >= 2 && size % per_host == 0 && size / per_host >= 2;
    INFO(size << " ranks, " << per_host << " per host");
    CHECK(c.set_hierarchical_allreduce(true) == can);
  }
}

TEST_CASE("hierarchical allreduce equals the flat ordered allreduce, bitwise", "[mpi][hierarchical]") {
  Communicator& flat = world();
  const std::vector<int> per_hosts = groupings(flat.size());
  if (per_hosts.empty()) WARN(flat.size() << " ranks make no 2 hosts of 2: nothing hierarchical to compare");
  for (int per_host : per_hosts) {
    MpiCommunicator emulated(MPI_COMM_WORLD, per_host);
    REQUIRE(emulated.set_hierarchical_allreduce(true));
    std::unique_ptr<Communicator> dup = emulated.duplicate();  // inherits the choice
    // One piece; several of 64K elements; 16 pieces of a size between the
    // bounds (41 x 64K + 7 elements); pieces of 256K (comm/hierarchical_allreduce.cpp),
    // that one in fp32 only (16 MB).
    for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{7}, kReduceSegment + 3, 3 * kReduceSegment + 5,
                      41 * (int64_t{1} << 16) + 7, 16 * kReduceSegment + 1})
      for (WireType wire : {WireType::F32, WireType::BF16, WireType::F16}) {
        if (n > 16 * kReduceSegment && wire != WireType::F32) continue;
        INFO(per_host << " ranks per host, n " << n << " wire " << static_cast<int>(wire));
        Tensor want = contribution(n, flat.rank(), 11);
        flat.allreduce_sum_ordered(want, wire);
        for (Communicator* c : {static_cast<Communicator*>(&emulated), dup.get()}) {
          Tensor got = contribution(n, flat.rank(), 11);
          c->allreduce_sum_ordered(got, wire);
          CHECK(bitwise_equal(got, want));
        }
      }
  }
}

TEST_CASE("hierarchical reduce-scatter and allgather of owned chunks equal the flat halves, bitwise",
          "[mpi][hierarchical]") {
  Communicator& flat = world();
  if (groupings(flat.size()).empty()) WARN(flat.size() << " ranks make no 2 hosts of 2: nothing hierarchical to compare");
  for (int per_host : groupings(flat.size())) {
    MpiCommunicator emulated(MPI_COMM_WORLD, per_host);
    REQUIRE(emulated.set_hierarchical_allreduce(true));
    for (int64_t n : {int64_t{1}, int64_t{7}, kReduceSegment + 3, 3 * kReduceSegment + 5})
      for (WireType wire : {WireType::F32, WireType::BF16}) {
        INFO(per_host << " ranks per host, n " << n << " wire " << static_cast<int>(wire));
        Tensor want = contribution(n, flat.rank(), 17);
        flat.reduce_scatter_sum_ordered(want, wire);
        Tensor got = contribution(n, flat.rank(), 17);
        emulated.reduce_scatter_sum_ordered(got, wire);
        int64_t wrong = 0;
        for_each_owned(0, n, flat.rank(), flat.size(), [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) wrong += got.data<float>()[i] != want.data<float>()[i];
        });
        CHECK(wrong == 0);
        // Each rank's owned chunks hold its own values; everything else is junk
        // that the allgather must overwrite.
        Tensor mine = contribution(n, flat.rank(), 19), theirs = contribution(n, flat.rank(), 19);
        for (int64_t i = 0; i < n; ++i) theirs.data<float>()[i] = -1.f;
        for_each_owned(0, n, flat.rank(), flat.size(), [&](int64_t b, int64_t e) {
          std::copy(mine.data<float>() + b, mine.data<float>() + e, theirs.data<float>() + b);
        });
        Tensor expect = Tensor::zeros(Shape{n});
        expect.copy_from(theirs);
        flat.allgather_owned(expect);
        emulated.allgather_owned(theirs);
        CHECK(bitwise_equal(theirs, expect));
      }
  }
}

TEST_CASE("a DistributedOptimizer over a hierarchical allreduce trains bitwise as over the flat one",
          "[mpi][hierarchical]") {
  Communicator& flat = world();
  if (groupings(flat.size()).empty()) WARN(flat.size() << " ranks make no 2 hosts of 2: nothing hierarchical to compare");
  for (int per_host : groupings(flat.size()))
    for (WireType wire : {WireType::F32, WireType::BF16})
      for (bool overlap : {true, false})
        for (int zero_stage : {0, 1}) {
          INFO(per_host << " ranks per host, wire " << static_cast<int>(wire) << (overlap ? " overlap" : "")
                        << " ZeRO stage " << zero_stage);
          MpiCommunicator emulated(MPI_COMM_WORLD, per_host);
          REQUIRE(emulated.set_hierarchical_allreduce(true));
          std::unique_ptr<Model> m[2];
          std::unique_ptr<Optimizer> opt[2];
          std::unique_ptr<DistributedOptimizer> d[2];
          for (int h = 0; h < 2; ++h) {
            m[h] = models::build_model("lenet", {}, 3);
            OptimizerConfig oc;
            oc.name = "adam";
            opt[h] = make_optimizer(m[h]->params(), oc);
            DistributedOptions o;
            o.bucket_bytes = 64 << 10;  // several buckets, some of several segments' worth of calls
            o.first_bucket_bytes = 16 << 10;
            o.shared_memory = false;  // messages: the path that crosses hosts
            o.overlap = overlap;
            o.wire = wire;
            o.zero_stage = zero_stage;
            d[h] = std::make_unique<DistributedOptimizer>(*opt[h], m[h]->params(), h ? emulated : flat, o);
            DistributedOptimizer* dh = d[h].get();
            m[h]->net().set_grad_ready_hook([dh](int64_t end) { dh->on_gradients_ready(end); });
            d[h]->broadcast_state(0);
          }
          for (int step = 0; step < 3; ++step) {
            const uint64_t key = rng_key(13, static_cast<uint64_t>(flat.rank()), static_cast<uint64_t>(step));
            for (int h = 0; h < 2; ++h) {
              Tensor x, y;
              make_batch(key, 8, x, y);
              d[h]->begin_backward(true);
              const Tensor& logits = m[h]->net().forward(x, ForwardContext{});
              Tensor g = m[h]->net().output_grad();
              softmax_cross_entropy_backward(logits, y, 1.f / 8, g);
              m[h]->net().backward({});
              d[h]->step(0.01f);
            }
          }
          CHECK(bitwise_equal(m[1]->params().values(), m[0]->params().values()));
          // ZeRO-1: the state gathered to rank 0 (allgathers of owned chunks) is the same.
          const auto s0 = d[0]->gather_state(), s1 = d[1]->gather_state();
          REQUIRE(s0.size() == s1.size());
          for (size_t k = 0; k < s0.size(); ++k) CHECK(bitwise_equal(s1[k].second, s0[k].second));
        }
}
