// Samplers (the distributed data contract), synthetic data and the prefetch loader.
#include <catch2/catch.hpp>

#include <set>

#include "data/loader.h"
#include "data/sampler.h"
#include "data/synthetic.h"

using namespace lockstep;

TEST_CASE("a global batch holds the same samples at any world size", "[data]") {
  const int64_t size = 1000, G = 64;
  for (int64_t epoch : {0, 3}) {
    for (int64_t step : {0, 7, 14}) {
      std::multiset<int64_t> reference;
      for (int world : {1, 2, 4, 8}) {
        std::multiset<int64_t> global;
        for (int r = 0; r < world; ++r) {
          TrainSampler s(size, G, world, r, 42);
          CHECK(s.steps_per_epoch() == size / G);
          CHECK(s.local_batch() == G / world);
          std::vector<int64_t> idx;
          s.indices(epoch, step, idx);
          CHECK(static_cast<int64_t>(idx.size()) == G / world);
          global.insert(idx.begin(), idx.end());
        }
        CHECK(global.size() == static_cast<size_t>(G));
        CHECK(std::set<int64_t>(global.begin(), global.end()).size() == static_cast<size_t>(G));  // disjoint shards
        if (world == 1) reference = global;
        CHECK(global == reference);
      }
    }
  }
}

TEST_CASE("each epoch is a permutation, and epochs and seeds differ", "[data]") {
  TrainSampler s(100, 10, 1, 0, 7);
  std::vector<int64_t> all, idx;
  for (int64_t st = 0; st < 10; ++st) {
    s.indices(0, st, idx);
    all.insert(all.end(), idx.begin(), idx.end());
  }
  CHECK(std::set<int64_t>(all.begin(), all.end()).size() == 100);
  std::vector<int64_t> e0, e1, other;
  s.indices(0, 0, e0);
  s.indices(1, 0, e1);
  TrainSampler t(100, 10, 1, 0, 8);
  t.indices(0, 0, other);
  CHECK(e0 != e1);
  CHECK(e0 != other);
}

TEST_CASE("batch arithmetic errors are input errors", "[data]") {
  CHECK_THROWS_AS(TrainSampler(100, 10, 3, 0, 1), InputError);   // 10 does not split over 3
  CHECK_THROWS_AS(TrainSampler(100, 200, 1, 0, 1), InputError);  // batch larger than the data
}

TEST_CASE("evaluation covers the data set exactly once over ranks", "[data]") {
  for (int world : {1, 3, 4}) {
    std::vector<int64_t> seen;
    for (int r = 0; r < world; ++r) {
      EvalSampler e(1001, 64, world, r);
      std::vector<int64_t> idx;
      for (int64_t b = 0; b < e.batches(); ++b) {
        e.indices(b, idx);
        CHECK(idx.size() <= 64);
        seen.insert(seen.end(), idx.begin(), idx.end());
      }
    }
    std::sort(seen.begin(), seen.end());
    REQUIRE(seen.size() == 1001);
    for (int64_t i = 0; i < 1001; ++i) REQUIRE(seen[static_cast<size_t>(i)] == i);
  }
}

TEST_CASE("synthetic samples are a pure function of their index", "[data]") {
  SyntheticDataset d("s", Shape{2, 3, 3}, 5, 100, 9);
  std::vector<float> a(18 * 2), b(18 * 2);
  std::vector<int32_t> la(2), lb(2);
  const std::vector<int64_t> i1{4, 17}, i2{17, 4};
  d.fill(i1, a.data(), la.data());
  d.fill(i2, b.data(), lb.data());
  CHECK(std::equal(a.begin(), a.begin() + 18, b.begin() + 18));
  CHECK(la[0] == lb[1]);
  CHECK(la[0] >= 0);
  CHECK(la[0] < 5);
}

TEST_CASE("the prefetch loader returns the planned batches in order", "[data]") {
  SyntheticDataset d("s", Shape{1, 2, 2}, 3, 50, 1);
  PrefetchLoader loader(d, 8, 3);
  for (int round = 0; round < 3; ++round) {
    const int64_t count = 6 + round;
    loader.begin(count, [&](int64_t k, std::vector<int64_t>& out) {
      out.clear();
      for (int64_t j = 0; j < 1 + k % 8; ++j) out.push_back((k * 7 + j) % 50);
    });
    for (int64_t k = 0; k < count; ++k) {
      const Batch& b = loader.next();
      REQUIRE(b.index == k);
      REQUIRE(b.size() == 1 + k % 8);
      std::vector<float> expect(static_cast<size_t>(4 * b.size()));
      std::vector<int32_t> labels(static_cast<size_t>(b.size()));
      std::vector<int64_t> idx;
      for (int64_t j = 0; j < b.size(); ++j) idx.push_back((k * 7 + j) % 50);
      d.fill(idx, expect.data(), labels.data());
      REQUIRE(b.images.to_vector() == expect);
      REQUIRE(std::vector<int32_t>(b.labels.data<int32_t>(), b.labels.data<int32_t>() + b.size()) == labels);
    }
    CHECK_THROWS(loader.next());
  }
}

TEST_CASE("a failing batch surfaces as an exception from next()", "[data]") {
  SyntheticDataset d("s", Shape{1, 2, 2}, 3, 50, 1);
  PrefetchLoader loader(d, 4);
  loader.begin(3, [](int64_t k, std::vector<int64_t>& out) { out.assign(2, k == 1 ? 999 : 0); });
  CHECK_NOTHROW(loader.next());
  CHECK_THROWS_AS(loader.next(), Error);
}
