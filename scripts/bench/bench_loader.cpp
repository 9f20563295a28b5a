// bench_loader: how fast PrefetchLoader (data/loader.h) assembles batches of
// synthetic samples (data/synthetic.h) with 1, 2, 4, ... workers: the input
// side of a --benchmark run, alone. Rounds alternate the worker counts; each
// round times --batches batches after one untimed batch, consumed as fast as
// they come. Prints per round the ms per batch of each worker count, then the
// medians, each count's speedup over the first count and a JSON line.
//   --image-size 224  --channels 3  --batch-size 128  --batches 8  --rounds 5
//   --workers 1,2,4   (each from 1 to 64)
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "bench_args.h"
#include "bench_stats.h"
#include "data/loader.h"
#include "data/synthetic.h"

namespace {

using namespace lockstep;

struct Args {
  int64_t image_size = 224, channels = 3, batch = 128, batches = 8, rounds = 5;
  std::vector<int> workers{1, 2, 4};
};

Args parse(int argc, char** argv, bool& help) {
  const bench::KeyValues kv = bench::key_values(
      argc, argv, {"--image-size", "--channels", "--batch-size", "--batches", "--rounds", "--workers"});
  help = kv.help;
  Args a;
  if (kv.has("--image-size")) a.image_size = bench::int_argument("--image-size", kv.at("--image-size"), 1, 1024);
  if (kv.has("--channels")) a.channels = bench::int_argument("--channels", kv.at("--channels"), 1, 64);
  if (kv.has("--batch-size")) a.batch = bench::int_argument("--batch-size", kv.at("--batch-size"), 1, 4096);
  if (kv.has("--batches")) a.batches = bench::int_argument("--batches", kv.at("--batches"), 1, 10000);
  if (kv.has("--rounds")) a.rounds = bench::int_argument("--rounds", kv.at("--rounds"), 1, 1000);
  if (kv.has("--workers")) {
    a.workers.clear();
    std::stringstream list(kv.at("--workers"));
    for (std::string w; std::getline(list, w, ',');)
      a.workers.push_back(static_cast<int>(bench::int_argument("--workers", w, 1, 64)));
    if (a.workers.empty()) bench::bad_argument("--workers must list worker counts, got ''");
  }
  const int64_t values = a.channels * a.image_size * a.image_size * a.batch;
  if (values > (int64_t{1} << 30))
    bench::bad_argument("--batch-size {} of {} x {} x {} samples is more than 2^30 values", a.batch, a.channels,
                        a.image_size, a.image_size);
  return a;
}

// Milliseconds per batch over `batches` batches after one untimed batch.
double ms_per_batch(const SyntheticDataset& data, const Args& a, int workers) {
  PrefetchLoader loader(data, a.batch, 3, cpu_allocator(), workers);
  const int64_t n = a.batches + 1;
  loader.begin(n, [&](int64_t k, std::vector<int64_t>& out) {
    out.resize(static_cast<size_t>(a.batch));
    for (int64_t j = 0; j < a.batch; ++j) out[static_cast<size_t>(j)] = (k * a.batch + j) % data.size();
  });
  loader.next();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t k = 1; k < n; ++k) loader.next();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
         static_cast<double>(a.batches);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  try {
    bool help = false;
    a = parse(argc, argv, help);
    if (help) {
      std::puts("usage: bench_loader [--image-size 224] [--channels 3] [--batch-size 128] [--batches 8] "
                "[--rounds 5] [--workers 1,2,4]");
      return 0;
    }
  } catch (const bench::BadArgument& e) {
    std::fprintf(stderr, "bench_loader: %s\n", e.what());
    return bench::kBadArguments;
  }
  const SyntheticDataset data("synthetic", Shape{a.channels, a.image_size, a.image_size}, 1000, 100000, 42);
  std::printf("# PrefetchLoader, synthetic %ldx%ldx%ld, batch %ld: ms per batch (%ld batches per round)\n",
              a.channels, a.image_size, a.image_size, a.batch, a.batches);
  std::vector<std::vector<double>> ms(a.workers.size());
  for (int64_t r = 0; r < a.rounds; ++r) {
    std::printf("round %ld:", r + 1);
    for (size_t i = 0; i < a.workers.size(); ++i) {
      ms[i].push_back(ms_per_batch(data, a, a.workers[i]));
      std::printf("  %d worker%s %.1f", a.workers[i], a.workers[i] == 1 ? "" : "s", ms[i].back());
    }
    std::printf("\n");
  }
  std::string json = fmt::format("{{\"bench\":\"loader\",\"shape\":[{},{},{}],\"batch\":{},\"rounds\":{},\"workers\":[",
                                 a.channels, a.image_size, a.image_size, a.batch, a.rounds);
  const double base = bench::median(ms[0]);
  for (size_t i = 0; i < a.workers.size(); ++i) {
    const double m = bench::median(ms[i]);
    std::printf("median: %d worker%s %.1f ms per batch (%.2fx the first)\n", a.workers[i],
                a.workers[i] == 1 ? "" : "s", m, base / m);
    json += fmt::format("{}{{\"workers\":{},\"ms_per_batch\":{:.2f}}}", i ? "," : "", a.workers[i], m);
  }
  std::printf("%s]}\n", json.c_str());
  return 0;
}
