// Samplers (the distributed data contract), synthetic data and the prefetch loader.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "core/hash.h"
#include "core/rng.h"
#include "data/augment.h"
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

TEST_CASE("synthetic pixels are the documented hashes, bit for bit", "[data]") {
  // pattern(label) + noise(index) from core/rng.h, computed here value by
  // value, against the vectorised fill (whichever clone this CPU runs), over
  // a sample longer than any vector and with an odd tail.
  const uint64_t seed = 42;
  SyntheticDataset d("s", Shape{3, 7, 11}, 1000, 50, seed);
  const int64_t per = 3 * 7 * 11;
  const std::vector<int64_t> idx{0, 31, 49};
  std::vector<float> got(static_cast<size_t>(per) * idx.size());
  std::vector<int32_t> labels(idx.size());
  d.fill(idx, got.data(), labels.data());
  for (size_t k = 0; k < idx.size(); ++k) {
    const auto i = static_cast<uint64_t>(idx[k]);
    const auto label = static_cast<int32_t>(rng_u64(rng_key(seed, fnv1a("synthetic-label")), i) % 1000);
    REQUIRE(labels[k] == label);
    const uint64_t pk = rng_key(rng_key(seed, fnv1a("synthetic-pattern")), static_cast<uint64_t>(label));
    const uint64_t nk = rng_key(rng_key(seed, fnv1a("synthetic-noise")), i);
    for (int64_t e = 0; e < per; ++e) {
      const float pattern = u64_to_unit_float(rng_u64(pk, static_cast<uint64_t>(e))) - 0.5f;
      const float noise = u64_to_unit_float(rng_u64(nk, static_cast<uint64_t>(e))) - 0.5f;
      const float want = 0.25f * pattern + 2.f * noise;
      const float have = got[k * static_cast<size_t>(per) + static_cast<size_t>(e)];
      INFO("sample " << i << " value " << e);
      REQUIRE(std::memcmp(&have, &want, sizeof(float)) == 0);
    }
  }
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
      REQUIRE(b.inputs.to_vector() == expect);
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

// Workers split each batch into contiguous parts (loader.h): the batches, with
// augmentation, must be the same for any number of workers, including more
// workers than samples; the work is really spread (several threads ran parts).
TEST_CASE("the prefetch loader's workers assemble the same batches as one thread", "[data]") {
  const Shape shape{3, 12, 12};
  SyntheticDataset d("s", shape, 10, 200, 7);
  const auto plan = [](int64_t k, std::vector<int64_t>& out) {
    out.clear();
    for (int64_t j = 0; j < 1 + (k * 5) % 17; ++j) out.push_back((k * 13 + j * 3) % 200);  // 1 to 17 samples
  };
  std::mutex mu;
  std::set<std::thread::id> threads;
  const PrefetchLoader::Transform augment = [&](int64_t, std::span<const int64_t> idx, float* images) {
    crop_flip_batch(images, idx, shape, 7, 2);
    std::lock_guard<std::mutex> lock(mu);
    threads.insert(std::this_thread::get_id());
  };
  std::vector<std::vector<float>> reference;
  for (int workers : {1, 3, 8, 32}) {
    CAPTURE(workers);
    threads.clear();
    PrefetchLoader loader(d, 17, 3, cpu_allocator(), workers);
    REQUIRE(loader.workers() == workers);
    loader.begin(24, plan, augment);
    for (int64_t k = 0; k < 24; ++k) {
      const Batch& b = loader.next();
      REQUIRE(b.size() == 1 + (k * 5) % 17);
      std::vector<float> v = b.inputs.to_vector();
      for (int64_t j = 0; j < b.size(); ++j) v.push_back(static_cast<float>(b.labels.data<int32_t>()[j]));
      if (workers == 1)
        reference.push_back(std::move(v));
      else
        REQUIRE(v == reference[static_cast<size_t>(k)]);
    }
    CHECK(static_cast<int>(threads.size()) == std::min(workers, 17));  // the largest batch used every part
  }
}

TEST_CASE("a failing part of a batch surfaces from next(), and the loader goes on", "[data]") {
  SyntheticDataset d("s", Shape{1, 2, 2}, 3, 50, 1);
  PrefetchLoader loader(d, 8, 3, cpu_allocator(), 4);
  // Batch 1's sample at position 6 (in the last worker's part) is out of range.
  loader.begin(3, [](int64_t k, std::vector<int64_t>& out) {
    out.assign(8, 0);
    if (k == 1) out[6] = 999;
  });
  CHECK_NOTHROW(loader.next());
  CHECK_THROWS_AS(loader.next(), Error);
  // A new sequence on the same loader works.
  loader.begin(2, [](int64_t, std::vector<int64_t>& out) { out.assign(8, 1); });
  CHECK(loader.next().size() == 8);
  CHECK(loader.next().size() == 8);
}

// The consumer's wait for a batch (data wait: the trainer's input-bound
// figure) is measured and reset by take_wait_seconds. A dataset that takes at
// least 100 ms per batch makes the first next(), called right after begin(),
// wait at least 20 ms (80 ms of slack for the calls in between).
TEST_CASE("the prefetch loader reports how long the consumer waited", "[data]") {
  struct Slow final : Dataset {
    SyntheticDataset inner{"s", Shape{1, 2, 2}, 3, 50, 1};
    std::string name() const override { return "slow"; }
    int64_t size() const override { return inner.size(); }
    Shape sample_shape() const override { return inner.sample_shape(); }
    int64_t num_classes() const override { return inner.num_classes(); }
    void fill(std::span<const int64_t> idx, void* images, int32_t* labels) const override {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      inner.fill(idx, images, labels);
    }
  } slow;
  PrefetchLoader loader(slow, 4, 2);
  CHECK(loader.take_wait_seconds() == 0.0);
  loader.begin(2, [](int64_t, std::vector<int64_t>& out) { out.assign(4, 1); });
  loader.next();
  CHECK(loader.take_wait_seconds() >= 0.02);
  CHECK(loader.take_wait_seconds() == 0.0);  // taken: reset
}
