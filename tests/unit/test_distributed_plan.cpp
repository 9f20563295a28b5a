// Pure parts of the distributed runtime: bucket plans, preflight tables,
// checkpoints, the accumulation sampler, the single-process communicator.
#include <catch2/catch.hpp>

#include <algorithm>

#include "checkpoint/checkpoint.h"
#include "comm/communicator.h"
#include "data/sampler.h"
#include "optim/distributed_optimizer.h"
#include "preflight.h"
#include "registry.h"
#include "temp_dir.h"

using namespace lockstep;
using lockstep::testing::TempDir;

TEST_CASE("buckets tile the gradient buffer in backward order at parameter boundaries", "[buckets]") {
  for (const char* model : {"lenet", "keras-cnn"}) {
    auto m = models::build_model(model, {}, 1);
    const auto& store = m->params();
    // Parameter offsets in buffer (backward) order, and the buffer's end.
    std::vector<int64_t> starts;
    for (const auto& p : store.params()) starts.push_back(p.offset);
    std::sort(starts.begin(), starts.end());
    for (int64_t cap : {int64_t{1}, int64_t{4096}, int64_t{100} << 10, int64_t{25} << 20})
      for (int64_t first : {int64_t{0}, int64_t{1} << 10, int64_t{1} << 20}) {
        const auto buckets = plan_buckets(store, cap, first);
        INFO(model << " cap " << cap << " first " << first);
        REQUIRE_FALSE(buckets.empty());
        CHECK(buckets.front().begin == 0);
        CHECK(buckets.back().end == store.padded_numel());
        for (size_t i = 0; i < buckets.size(); ++i) {
          const Bucket& b = buckets[i];
          if (i > 0) CHECK(b.begin == buckets[i - 1].end);
          CHECK(std::binary_search(starts.begin(), starts.end(), b.begin));  // at a parameter
          // DDP's rule: a bucket closes once it holds at least its cap, so every
          // bucket but the last reaches it, and none reaches it before its last
          // parameter.
          const int64_t limit = std::max<int64_t>(1, (i == 0 && first > 0 ? std::min(first, cap) : cap) / 4);
          const int64_t last = *std::prev(std::lower_bound(starts.begin(), starts.end(), b.end));
          CHECK(last - b.begin < limit);
          if (i + 1 < buckets.size()) CHECK(b.numel() >= limit);
        }
      }
    CHECK(plan_buckets(store, 1).size() == store.params().size());  // one bucket per tensor
    CHECK(plan_buckets(store, int64_t{1} << 30).size() == 1);
  }
  // keras-cnn under DDP's caps: its 4.7 MB dense layer (the second in backward
  // order) closes the 1 MB first bucket, which is ready as soon as that
  // layer's backward is done; the convolutions form the second bucket.
  auto m = models::build_model("keras-cnn", {}, 1);
  const auto buckets = plan_buckets(m->params(), int64_t{25} << 20, int64_t{1} << 20);
  REQUIRE(buckets.size() == 2);
  CHECK(buckets[0].numel() * 4 > (int64_t{4} << 20));
  CHECK(buckets[1].numel() * 4 < (int64_t{1} << 20));
}

TEST_CASE("preflight table names the ranks that differ and in what", "[preflight]") {
  const Fingerprint a{{"model", "lenet"}, {"lr", "0.05"}, {"seed", "42"}};
  Fingerprint b = a;
  b["lr"] = "0.1";
  Fingerprint c = a;
  c.erase("seed");
  CHECK(compare_fingerprints({a, a, a}).empty());
  const std::string t = compare_fingerprints({a, b, a, b, a});
  CHECK(t.find("lr") != std::string::npos);
  CHECK(t.find("0,2,4") != std::string::npos);
  CHECK(t.find("1,3") != std::string::npos);
  CHECK(t.find("model") == std::string::npos);  // only differing fields
  const std::string u = compare_fingerprints({a, a, a, c});
  CHECK(u.find("(missing)") != std::string::npos);
  CHECK(u.find("0-2") != std::string::npos);
  CHECK(format_ranks({0, 1, 2, 5, 7, 8}) == "0-2,5,7,8");
}

TEST_CASE("accumulation reads a rank's shard in consecutive micro-batches", "[data]") {
  const int64_t G = 48;
  for (int world : {1, 2, 3}) {
    for (int K : {1, 2, 4}) {
      if (G % (world * K)) continue;
      std::vector<int64_t> step_samples;
      for (int r = 0; r < world; ++r) {
        TrainSampler s(480, G, world, r, 5, true, K);
        TrainSampler plain(480, G, world, r, 5, true, 1);
        std::vector<int64_t> whole, part;
        plain.indices(2, 3, whole);
        std::vector<int64_t> joined;
        for (int k = 0; k < K; ++k) {
          s.indices(2, 3, part, k);
          CHECK(s.shard_offset(k) == r * (G / world) + k * (G / world / K));
          joined.insert(joined.end(), part.begin(), part.end());
        }
        CHECK(joined == whole);
        step_samples.insert(step_samples.end(), joined.begin(), joined.end());
      }
      CHECK(step_samples.size() == static_cast<size_t>(G));
    }
  }
}

TEST_CASE("the single-process communicator is the identity", "[comm]") {
  SingleProcessCommunicator c;
  Tensor t = Tensor::from_vector(Shape{2}, {1.5f, -2.f});
  c.allreduce(t, ReduceOp::Average);
  c.broadcast(t, 0);
  Tensor out = Tensor::zeros(Shape{2});
  c.allgather(t, out);
  CHECK(out.to_vector() == std::vector<float>{1.5f, -2.f});
  CHECK(allgather_strings(c, "x") == std::vector<std::string>{"x"});
  CHECK(broadcast_string(c, "y", 0) == "y");
  CHECK_THROWS_AS(c.broadcast(t, 1), Error);
}

TEST_CASE("checkpoints round-trip, keep the newest K and skip damaged ones", "[checkpoint]") {
  TempDir dir;
  auto m = models::build_model("mlp", {}, 1);
  auto opt = make_optimizer(m->params(), OptimizerConfig{});
  for (float& v : opt->state()[0].second->span<float>()) v = 0.25f;
  opt->set_steps(7);
  CheckpointInfo info;
  info.global_batch = 64;
  info.seed = 9;
  info.config_json = "{}";
  for (int64_t step : {10, 20, 30, 40}) {
    info.progress = {step, step / 25, step % 25};
    save_checkpoint(dir.path().string(), *m, *opt, info, 3);
  }
  const auto files = list_checkpoints(dir.path().string());
  REQUIRE(files.size() == 3);
  CHECK(files[0].find("ckpt-000000040.safetensors") != std::string::npos);
  CHECK(files[2].find("ckpt-000000020.safetensors") != std::string::npos);

  auto m2 = models::build_model("mlp", {}, 2);
  auto opt2 = make_optimizer(m2->params(), OptimizerConfig{});
  std::vector<std::string> warnings;
  auto loaded = load_latest_checkpoint(dir.path().string(), *m2, *opt2, [&](auto w) { warnings.push_back(w); });
  REQUIRE(loaded);
  CHECK(loaded->info.progress.step == 40);
  CHECK(loaded->info.progress.epoch == 1);
  CHECK(loaded->info.progress.step_in_epoch == 15);
  CHECK(loaded->info.global_batch == 64);
  CHECK(opt2->steps() == 7);
  CHECK(m2->params().values().to_vector() == m->params().values().to_vector());
  CHECK(opt2->state()[0].second->to_vector() == opt->state()[0].second->to_vector());
  CHECK(warnings.empty());

  // Damage the newest: the next older one is used, with a warning naming the file.
  auto bytes = lockstep::testing::read_bytes(files[0]);
  bytes.resize(bytes.size() / 2);
  lockstep::testing::write_bytes(files[0], bytes);
  loaded = load_latest_checkpoint(dir.path().string(), *m2, *opt2, [&](auto w) { warnings.push_back(w); });
  REQUIRE(loaded);
  CHECK(loaded->info.progress.step == 30);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("ckpt-000000040") != std::string::npos);

  // A single bit flipped in a tensor's data (the file still parses) fails its
  // checksum; so does one in the metadata. The next older one is used.
  {
    auto b30 = lockstep::testing::read_bytes(files[1]);
    const size_t last = b30.size() - 3;  // inside the last tensor's data
    b30[last] ^= 0x10;
    lockstep::testing::write_bytes(files[1], b30);
    warnings.clear();
    loaded = load_latest_checkpoint(dir.path().string(), *m2, *opt2, [&](auto w) { warnings.push_back(w); });
    REQUIRE(loaded);
    CHECK(loaded->info.progress.step == 20);
    REQUIRE(warnings.size() == 2);
    CHECK(warnings[1].find("ckpt-000000030") != std::string::npos);
    CHECK(warnings[1].find("fails its checksum") != std::string::npos);
    b30[last] ^= 0x10;  // repaired: loads again
    // In the header's metadata: change one digit of the seed ("seed":"9" -> "8").
    std::string text(b30.begin(), b30.end());
    const size_t at = text.find("\"seed\":\"9\"");
    REQUIRE(at != std::string::npos);
    b30[at + 8] = '8';
    lockstep::testing::write_bytes(files[1], b30);
    warnings.clear();
    loaded = load_latest_checkpoint(dir.path().string(), *m2, *opt2, [&](auto w) { warnings.push_back(w); });
    REQUIRE(loaded);
    CHECK(loaded->info.progress.step == 20);
    REQUIRE(warnings.size() == 2);
    CHECK(warnings[1].find("metadata checksum mismatch") != std::string::npos);
  }

  // Another model's checkpoints are refused; an empty directory means a fresh start.
  auto lenet = models::build_model("lenet", {}, 1);
  auto lopt = make_optimizer(lenet->params(), OptimizerConfig{});
  CHECK_THROWS_AS(load_latest_checkpoint(dir.path().string(), *lenet, *lopt, [](auto) {}), InputError);
  TempDir empty;
  CHECK_FALSE(load_latest_checkpoint(empty.path().string(), *lenet, *lopt, [](auto) {}));
}
