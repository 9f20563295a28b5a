// ZeRO-1 on one process: which rank owns which elements (comm/ownership.h),
// and a sharded optimizer (Optimizer::shard) updating exactly its elements,
// with exactly the unsharded optimizer's results, from packed state.
#include <catch2/catch.hpp>

#include "comm/ownership.h"
#include "core/rng.h"
#include "optim/distributed_optimizer.h"
#include "registry.h"

using namespace lockstep;

TEST_CASE("ownership: the ranks' chunks partition every call's range, segment by segment", "[zero]") {
  const std::vector<ElementRange> calls{{0, 5}, {5, 5 + kReduceSegment + 3}, {5 + kReduceSegment + 3, 3 * kReduceSegment + 1}};
  for (int size : {1, 2, 3, 4, 7}) {
    std::vector<int> owner(static_cast<size_t>(calls.back().end), -1);
    int64_t total = 0;
    for (int r = 0; r < size; ++r) {
      const std::vector<ElementRange> mine = owned_ranges(calls, r, size);
      for (size_t i = 0; i < mine.size(); ++i) {
        REQUIRE(mine[i].begin < mine[i].end);
        if (i) REQUIRE(mine[i - 1].end < mine[i].begin);  // sorted, disjoint, adjacent ones merged
        for (int64_t e = mine[i].begin; e < mine[i].end; ++e) {
          REQUIRE(owner[static_cast<size_t>(e)] == -1);
          owner[static_cast<size_t>(e)] = r;
        }
        total += mine[i].numel();
      }
    }
    INFO("size " << size);
    CHECK(total == calls.back().end);
    // Within a segment of `len` elements rank r owns [len*r/size, len*(r+1)/size).
    const int64_t s0 = 5, len = kReduceSegment;
    for (int r = 0; r < size; ++r) CHECK(owner[static_cast<size_t>(s0 + len * r / size)] == r);
  }
  CHECK(owned_ranges(calls, 0, 1) == std::vector<ElementRange>{{0, 3 * kReduceSegment + 1}});
}

TEST_CASE("a sharded optimizer updates its elements exactly as the unsharded one", "[zero][optim]") {
  for (const char* name : {"sgd", "adam", "adamw"}) {
    OptimizerConfig oc;
    oc.name = name;
    oc.weight_decay = 0.01f;
    oc.decay_all = false;  // biases and batch norm skip decay: ranges with two settings
    auto whole = models::build_model("resnet20", {Shape{3, 32, 32}, 10}, 5);
    auto whole_opt = make_optimizer(whole->params(), oc);
    const int size = 3;
    const std::vector<Bucket> buckets = plan_buckets(whole->params(), 64 << 10, 16 << 10);
    std::vector<std::unique_ptr<Model>> shards;
    std::vector<std::unique_ptr<Optimizer>> opts;
    for (int r = 0; r < size; ++r) {
      shards.push_back(models::build_model("resnet20", {Shape{3, 32, 32}, 10}, 5));
      opts.push_back(make_optimizer(shards.back()->params(), oc));
      opts.back()->shard(owned_ranges(buckets, r, size));
    }
    const int64_t n = whole->params().padded_numel();
    int64_t state_total = 0;
    for (auto& o : opts) state_total += o->state_numel();
    CHECK(state_total == n);
    for (int step = 0; step < 3; ++step) {
      Rng rng(rng_key(17, static_cast<uint64_t>(step)));
      std::vector<float> g(static_cast<size_t>(n));
      for (float& v : g) v = rng.normal();
      std::copy(g.begin(), g.end(), whole->params().grads().data<float>());
      whole_opt->step(0.05f, 0.5f);
      for (int r = 0; r < size; ++r) {
        std::copy(g.begin(), g.end(), shards[static_cast<size_t>(r)]->params().grads().data<float>());
        opts[static_cast<size_t>(r)]->step(0.05f, 0.5f);
      }
    }
    // Each rank's owned elements are bitwise the unsharded result; the others untouched.
    const std::vector<float> want = whole->params().values().to_vector();
    auto init = models::build_model("resnet20", {Shape{3, 32, 32}, 10}, 5);
    const std::vector<float> start = init->params().values().to_vector();
    for (int r = 0; r < size; ++r) {
      INFO(name << " rank " << r);
      const std::vector<float> got = shards[static_cast<size_t>(r)]->params().values().to_vector();
      std::vector<char> owned(static_cast<size_t>(n), 0);
      for (const ElementRange& o : opts[static_cast<size_t>(r)]->owned())
        std::fill(owned.begin() + o.begin, owned.begin() + o.end, 1);
      int64_t wrong = 0, touched = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (owned[static_cast<size_t>(i)]) wrong += got[static_cast<size_t>(i)] != want[static_cast<size_t>(i)];
        else touched += got[static_cast<size_t>(i)] != start[static_cast<size_t>(i)];
      }
      CHECK(wrong == 0);
      CHECK(touched == 0);
      // The packed state is the unsharded state's owned elements, in order.
      auto whole_state = whole_opt->state();
      auto mine = opts[static_cast<size_t>(r)]->state();
      REQUIRE(mine.size() == whole_state.size());
      for (size_t k = 0; k < mine.size(); ++k) {
        int64_t at = 0, differ = 0;
        for (const ElementRange& o : opts[static_cast<size_t>(r)]->owned())
          for (int64_t i = o.begin; i < o.end; ++i)
            differ += mine[k].second->data<float>()[at++] != whole_state[k].second->data<float>()[i];
        CHECK(differ == 0);
      }
    }
  }
}

TEST_CASE("shard keeps the owned part of the current state", "[zero][optim]") {
  ParameterStore store;
  store.declare("a", Shape{40});
  store.finalize();
  OptimizerConfig oc;
  auto opt = make_optimizer(store, oc);  // sgd with momentum: one state tensor
  Tensor* m = opt->state()[0].second;
  for (int64_t i = 0; i < m->numel(); ++i) m->data<float>()[i] = static_cast<float>(i);
  opt->shard({{2, 5}, {10, 12}});
  CHECK(opt->sharded());
  CHECK(opt->state_numel() == 5);
  CHECK(opt->state()[0].second->to_vector() == std::vector<float>{2, 3, 4, 10, 11});
  CHECK_THROWS(opt->shard({{0, 1}}));
}
