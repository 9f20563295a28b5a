// bench_fusion: gradient fusion under mpirun, on realistic layouts.
//   mpirun -np 2 bench_fusion [--reps 15] [--threshold-mb 25] [--first-bucket-mb 1]
// Layouts: ResNet-50's 161 parameter tensors (25.6 M values) and 4,000 small
// tensors (64 to 2,048 values, the sizes of biases and normalisation scales). For each, interleaved over
// --reps rounds: one MPI_Allreduce per tensor (no fusion), lockstep's bucket
// path (BucketReducer over the flat gradient buffer, in place) through shared
// memory — what the trainer uses when all ranks share a host — and through
// messages, one raw MPI_Allreduce of the whole buffer, and one ordered
// allreduce of the whole buffer (the message path's algorithm without buckets).
// bucket_vs_* use the shared-memory path when the ranks share a host. Times are the slowest
// rank's, medians over rounds. Also sweeps the bucket threshold on ResNet-50.
// Last line: JSON with bucket_vs_raw (raw time / bucket time) and
// bucket_vs_per_tensor for each layout. A bad flag or value: one line on rank
// 0's stderr, every rank exits 2 (bench_args.h); --help prints the usage.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench_args.h"
#include "bench_stats.h"
#include "comm/bucket_reducer.h"
#include "comm/mpi_session.h"
#include "comm/shm_allreduce.h"
#include "optim/distributed_optimizer.h"

using namespace lockstep;

namespace {

constexpr const char* kUsage =
    "usage: mpirun -np N bench_fusion [--reps 15] [--threshold-mb 25] [--first-bucket-mb 1]\n"
    "  --reps N              interleaved timing rounds per layout (1 or more)\n"
    "  --threshold-mb MB     bucket cap, from 0.000001 to 1048576\n"
    "  --first-bucket-mb MB  cap of the first bucket (0: the same as --threshold-mb)\n";

constexpr int kMaxReps = 100000;
constexpr double kMaxMb = 1048576;  // 1 TiB

struct Config {
  int reps = 15;
  double threshold_mb = 25, first_mb = 1;
  bool help = false;
};

// Throws bench::BadArgument naming the first bad flag or value.
Config parse(int argc, char** argv) {
  const bench::KeyValues kv = bench::key_values(argc, argv, {"--reps", "--threshold-mb", "--first-bucket-mb"});
  Config c;
  c.help = kv.help;
  if (kv.has("--reps")) c.reps = static_cast<int>(bench::int_argument("--reps", kv.at("--reps"), 1, kMaxReps));
  if (kv.has("--threshold-mb"))  // at least a byte
    c.threshold_mb = bench::number_argument(
        "--threshold-mb", kv.at("--threshold-mb"), [](double v) { return v >= 1e-6 && v <= kMaxMb; },
        "a number of MB from 0.000001 to 1048576");
  if (kv.has("--first-bucket-mb"))
    c.first_mb = bench::number_argument(
        "--first-bucket-mb", kv.at("--first-bucket-mb"), [](double v) { return v >= 0 && v <= kMaxMb; },
        "a number of MB from 0 to 1048576");
  return c;
}

std::vector<int64_t> resnet50_sizes() {
  std::vector<int64_t> s{64 * 3 * 7 * 7, 64, 64};  // conv1, bn1
  int64_t in = 64;
  for (auto [planes, blocks] : {std::pair{64, 3}, std::pair{128, 4}, std::pair{256, 6}, std::pair{512, 3}}) {
    for (int b = 0; b < blocks; ++b) {
      for (int64_t v : {planes * in, int64_t{planes}, int64_t{planes}, int64_t{planes} * planes * 9, int64_t{planes},
                        int64_t{planes}, int64_t{4} * planes * planes, int64_t{4} * planes, int64_t{4} * planes})
        s.push_back(v);
      if (b == 0) {  // downsample
        s.push_back(int64_t{4} * planes * in);
        s.push_back(int64_t{4} * planes);
        s.push_back(int64_t{4} * planes);
      }
      in = int64_t{4} * planes;
    }
  }
  s.push_back(1000 * 2048);
  s.push_back(1000);
  return s;
}

// Bias- and norm-sized tensors (64 to 2,048 values), as a model with many
// normalisation layers and biases has.
std::vector<int64_t> many_small_sizes() {
  std::vector<int64_t> s;
  for (int i = 0; i < 4000; ++i) s.push_back(64 << (i % 6));
  return s;
}

using bench::median;

// Seconds the slowest rank took for fn().
double timed(Communicator& c, const std::function<void()>& fn) {
  c.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  Tensor d = Tensor::zeros(Shape{1}, DType::F64);
  d.data<double>()[0] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  c.allreduce(d, ReduceOp::Max);
  return d.data<double>()[0];
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  const std::string bad = bench::parse_arguments(parse, argc, argv, cfg);
  MpiSession mpi(&argc, &argv);
  auto comm = mpi.world();
  const int rank = comm->rank();
  if (const int code = bench::stop_early(rank, "bench_fusion", bad, cfg.help, kUsage); code >= 0) return code;
  const int reps = cfg.reps;
  const double threshold_mb = cfg.threshold_mb, first_mb = cfg.first_mb;
  std::string json = "{\"bench\":\"fusion\",\"ranks\":" + std::to_string(comm->size());
  for (const auto& [name, sizes] : {std::pair{std::string("resnet50"), resnet50_sizes()},
                                    std::pair{std::string("many_small"), many_small_sizes()}}) {
    ParameterStore store;
    for (size_t i = 0; i < sizes.size(); ++i) store.declare(fmt::format("p{}", i), Shape{sizes[i]});
    store.finalize();  // zero-filled: pages touched
    float* g = store.grads().data<float>();
    auto fill = [&] {
      for (int64_t i = 0; i < store.padded_numel(); ++i) g[i] = static_cast<float>((rank + i) % 5) * 0.25f;
    };
    const auto plan = plan_buckets(store, static_cast<int64_t>(threshold_mb * 1048576),
                                   static_cast<int64_t>(first_mb * 1048576));
    BucketReducer reducer(*comm, store.grads(), plan, BucketReducer::Options{false, true, WireType::F32, nullptr});
    // The same buckets through shared memory: a second store whose gradients
    // live in the host's shared window (as the trainer does on one host).
    ParameterStore shared_store;
    for (size_t i = 0; i < sizes.size(); ++i) shared_store.declare(fmt::format("p{}", i), Shape{sizes[i]});
    shared_store.finalize();
    std::unique_ptr<ShmAllreduce> shm;
    if (auto mem = comm->allocate_shared(ShmAllreduce::kHeaderBytes + shared_store.padded_numel() * 4)) {
      shm = std::make_unique<ShmAllreduce>(mem, rank);
      shared_store.rebind_grads(Tensor::zeros(
          Shape{shared_store.padded_numel()}, DType::F32,
          std::make_shared<BorrowedAllocator>(shm->data(rank), shared_store.padded_numel() * 4, mem)));
    }
    BucketReducer shm_reducer(*comm, shared_store.grads(), plan,
                              BucketReducer::Options{false, true, WireType::F32, nullptr, shm.get()});
    float* sg = shared_store.grads().data<float>();
    auto fill_shared = [&] {
      for (int64_t i = 0; i < shared_store.padded_numel(); ++i) sg[i] = static_cast<float>((rank + i) % 5) * 0.25f;
    };
    std::vector<double> per_tensor, bucket, bucket_shm, raw, raw_ordered;
    for (int r = 0; r < reps; ++r) {
      fill();
      per_tensor.push_back(timed(*comm, [&] {
        for (auto& p : store.params()) comm->allreduce(p.grad, ReduceOp::Sum);
      }));
      fill();
      bucket.push_back(timed(*comm, [&] { reducer.finish(); }));
      fill_shared();
      bucket_shm.push_back(timed(*comm, [&] {
        shm_reducer.quiesce();
        shm_reducer.finish();
      }));
      fill();
      raw.push_back(timed(*comm, [&] { comm->allreduce(store.grads(), ReduceOp::Sum); }));
      fill();
      raw_ordered.push_back(timed(*comm, [&] { comm->allreduce_sum_ordered(store.grads(), WireType::F32); }));
    }
    const double tp = median(per_tensor), tm = median(bucket), ts = median(bucket_shm), tr = median(raw),
                 to = median(raw_ordered);
    const double tb = shm ? ts : tm;  // the path the trainer takes on one host
    const double mb = static_cast<double>(store.numel()) * 4 / 1e6;
    if (rank == 0) {
      std::printf("%s: %zu tensors, %.1f MB, %zu buckets (cap %.0f MB, first %.0f MB), %d rounds\n", name.c_str(),
                  sizes.size(), mb, plan.size(), threshold_mb, first_mb, reps);
      std::printf("  per-tensor MPI_Allreduce       %9.2f ms\n  lockstep buckets, shared mem.  %9.2f ms%s\n"
                  "  lockstep buckets, messages     %9.2f ms\n  raw MPI_Allreduce              %9.2f ms\n"
                  "  raw ordered allreduce          %9.2f ms\n",
                  tp * 1e3, ts * 1e3, shm ? "" : " (no shared memory: messages)", tm * 1e3, tr * 1e3, to * 1e3);
      std::printf("  bucket_vs_raw %.3f  bucket_vs_raw_ordered %.3f  bucket_vs_per_tensor %.2f\n", tr / tb, to / tb,
                  tp / tb);
    }
    json += ",\"" + name + "\":{\"tensors\":" + std::to_string(sizes.size()) + ",\"mb\":" + std::to_string(mb) +
            ",\"per_tensor_ms\":" + std::to_string(tp * 1e3) + ",\"bucket_ms\":" + std::to_string(tb * 1e3) +
            ",\"bucket_messages_ms\":" + std::to_string(tm * 1e3) + ",\"shared_memory\":" + (shm ? "true" : "false") +
            ",\"raw_mpi_ms\":" + std::to_string(tr * 1e3) + ",\"raw_ordered_ms\":" + std::to_string(to * 1e3) +
            ",\"bucket_vs_raw\":" + std::to_string(tr / tb) + ",\"bucket_vs_raw_ordered\":" +
            std::to_string(to / tb) + ",\"bucket_vs_per_tensor\":" + std::to_string(tp / tb) + "}";
    if (name == "resnet50") {  // threshold sweep, on the trainer's path
      std::string sweep = ",\"threshold_sweep_ms\":{";
      for (double cap : {1.0, 4.0, 16.0, 25.0, 64.0, 128.0}) {
        ParameterStore& st = shm ? shared_store : store;
        BucketReducer r2(*comm, st.grads(),
                         plan_buckets(st, static_cast<int64_t>(cap * 1048576), static_cast<int64_t>(first_mb * 1048576)),
                         BucketReducer::Options{false, true, WireType::F32, nullptr, shm.get()});
        std::vector<double> t;
        for (int i = 0; i < std::max(3, reps / 3); ++i) {
          shm ? fill_shared() : fill();
          t.push_back(timed(*comm, [&] {
            r2.quiesce();
            r2.finish();
          }));
        }
        if (rank == 0) std::printf("  threshold %5.0f MB: %zu buckets, %.2f ms\n", cap, r2.buckets().size(), median(t) * 1e3);
        sweep += fmt::format("{}\"{}\":{:f}", sweep.back() == '{' ? "" : ",", static_cast<int>(cap), median(t) * 1e3);
      }
      json += sweep + "}";
    }
  }
  if (rank == 0) std::printf("%s}\n", json.c_str());
  return 0;
}
