// bench_allreduce: allreduce sweep in the nccl-tests style, run under mpirun.
//   mpirun -np 2 bench_allreduce -b 4 -e 256M -f 2 [--path mpi|ordered|hierarchical|shm] [--wire fp16|bf16] [-w 5] [-n 20]
// For each size from -b to -e bytes (x -f): warm-up, then timed in-place sums
// of fp32 data; columns size, count, time (us, median over ranks' max),
// algbw = size / time, busbw = algbw * 2(N-1)/N (GB/s), and #wrong: elements
// that differ from the closed-form sum (inputs are small integers, exact in
// fp32). --path mpi is MPI_Allreduce; ordered is lockstep's message-passing
// ordered allreduce; hierarchical is the same sums in two levels, within and
// across hosts (comm/hierarchical_allreduce.h; several ranks on each of
// several hosts); shm is lockstep's shared-memory path (ranks on one host;
// the buffer then lives in the host's shared window). --wire fp16 or bf16
// (ordered and hierarchical paths) sends 16-bit values, as --grad-compression does; sizes
// and bandwidths stay those of the fp32 data (the wire carries half the
// bytes), and the inputs stay exact. The buffer is allocated once and touched
// before timing.
// Last line: JSON. A bad flag or value: one line on rank 0's stderr, every
// rank exits 2 (bench_args.h); --help prints the usage.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench_args.h"
#include "comm/mpi_session.h"
#include "comm/shm_allreduce.h"
#include "core/error.h"

using namespace lockstep;

namespace {

constexpr const char* kUsage =
    "usage: mpirun -np N bench_allreduce [-b 4] [-e 256M] [-f 2] [-w 5] [-n 20] [--path mpi|ordered|hierarchical|shm]\n"
    "                                   [--wire f32|fp16|bf16]\n"
    "  -b BYTES   smallest size (K, M, G: binary units; 1 byte to 64G)\n"
    "  -e BYTES   largest size, at least -b\n"
    "  -f FACTOR  size step, a number > 1\n"
    "  -w N       warm-up iterations per size (0 or more)\n"
    "  -n N       timed iterations per size (1 or more)\n"
    "  --path P   mpi: MPI_Allreduce; ordered (or lockstep): lockstep's ordered allreduce over messages;\n"
    "             hierarchical: the same sums within hosts, then across them (several ranks per host);\n"
    "             shm: lockstep's shared-memory path (every rank on one host)\n"
    "  --wire W   ordered and hierarchical paths: values on the wire (fp16, bf16: as --grad-compression; sizes stay fp32's)\n";

constexpr int64_t kMaxBytes = int64_t{64} << 30;
constexpr int kMaxSizes = 1000;
constexpr int kMaxIterations = 1000000;

struct Config {
  int64_t lo = 4, hi = int64_t{256} << 20;
  double factor = 2;
  int warmup = 5, iters = 20;
  std::string path = "mpi";
  WireType wire = WireType::F32;
  std::string wire_name = "f32";
  bool help = false;
};

// Throws bench::BadArgument naming the first bad flag or value.
Config parse(int argc, char** argv) {
  const bench::KeyValues kv = bench::key_values(argc, argv, {"-b", "-e", "-f", "-w", "-n", "--path", "--wire"});
  Config c;
  c.help = kv.help;
  if (kv.has("-b")) c.lo = bench::size_argument("-b", kv.at("-b"), kMaxBytes, "64G");
  if (kv.has("-e")) c.hi = bench::size_argument("-e", kv.at("-e"), kMaxBytes, "64G");
  if (kv.has("-f"))
    c.factor = bench::number_argument("-f", kv.at("-f"), [](double f) { return f > 1; }, "a number > 1");
  if (kv.has("-w")) c.warmup = static_cast<int>(bench::int_argument("-w", kv.at("-w"), 0, kMaxIterations));
  if (kv.has("-n")) c.iters = static_cast<int>(bench::int_argument("-n", kv.at("-n"), 1, kMaxIterations));
  if (kv.has("--path")) {
    c.path = bench::one_of("--path", kv.at("--path"), {"mpi", "ordered", "lockstep", "hierarchical", "shm"});
    if (c.path == "lockstep") c.path = "ordered";  // the path's first name
  }
  if (kv.has("--wire")) {
    c.wire_name = bench::one_of("--wire", kv.at("--wire"), {"f32", "fp16", "bf16"});
    c.wire = c.wire_name == "fp16" ? WireType::F16 : c.wire_name == "bf16" ? WireType::BF16 : WireType::F32;
    if (c.wire != WireType::F32 && c.path != "ordered" && c.path != "hierarchical")
      bench::bad_argument("--wire {} needs --path ordered or hierarchical (the other paths are fp32)", c.wire_name);
  }
  if (c.lo > c.hi)
    bench::bad_argument("-b {} is larger than -e {}", kv.has("-b") ? kv.at("-b") : "4",
                        kv.has("-e") ? kv.at("-e") : "256M");
  const double sizes =
      std::floor(std::log(static_cast<double>(c.hi) / static_cast<double>(c.lo)) / std::log(c.factor)) + 1;
  if (sizes > kMaxSizes)
    bench::bad_argument("-f {} makes {:.0f} sizes from -b to -e, more than {}", kv.at("-f"), sizes, kMaxSizes);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  const std::string bad = bench::parse_arguments(parse, argc, argv, cfg);
  MpiSession mpi(&argc, &argv);
  auto comm = mpi.world();
  const int rank = comm->rank(), N = comm->size();
  if (const int code = bench::stop_early(rank, "bench_allreduce", bad, cfg.help, kUsage); code >= 0) return code;
  const int64_t lo = cfg.lo, hi = cfg.hi;
  const double factor = cfg.factor;
  const int warmup = cfg.warmup, iters = cfg.iters;
  const std::string path = cfg.path;
  const int64_t max_count = std::max<int64_t>(1, hi / 4);
  Tensor buf;
  std::unique_ptr<ShmAllreduce> shm;
  if (path == "shm") {
    auto mem = comm->allocate_shared(ShmAllreduce::kHeaderBytes + max_count * 4);
    if (mem == nullptr) {  // the same answer on every rank
      if (rank == 0) std::fprintf(stderr, "bench_allreduce: --path shm needs every rank on one host\n");
      return bench::kBadArguments;
    }
    shm = std::make_unique<ShmAllreduce>(mem, rank);
    buf = Tensor::zeros(Shape{max_count}, DType::F32, std::make_shared<BorrowedAllocator>(shm->data(rank), max_count * 4, mem));
  } else {
    buf = Tensor::zeros(Shape{max_count});  // zero-filled: every page touched
  }
  if (path == "hierarchical" && !comm->set_hierarchical_allreduce(true)) {  // the same answer on every rank
    if (rank == 0)
      std::fprintf(stderr, "bench_allreduce: --path hierarchical needs the ranks grouped by host, at least 2 on each "
                           "of at least 2 hosts (%d ranks on %d host%s here)\n", N, comm->nodes(), comm->nodes() == 1 ? "" : "s");
    return bench::kBadArguments;
  }
  if (rank == 0) {
    std::printf("# lockstep allreduce sweep: %d ranks, path %s, fp32 sum in place, wire %s, %d warm-up + %d timed\n",
                N, path.c_str(), cfg.wire_name.c_str(), warmup, iters);
    std::printf("# %12s %12s %10s %9s %9s %7s\n", "size(B)", "count", "time(us)", "algbw", "busbw", "#wrong");
  }
  std::string json = "[";
  double bus_4mb = 0, bus_256mb = 0;
  for (double bytes = static_cast<double>(lo); bytes <= static_cast<double>(hi) * 1.0001; bytes *= factor) {
    const int64_t count = std::max<int64_t>(1, static_cast<int64_t>(bytes) / 4);
    Tensor t = buf.slice(0, Shape{count});
    auto fill = [&] {
      float* p = t.data<float>();
      for (int64_t i = 0; i < count; ++i) p[i] = static_cast<float>((rank + i) % 7);
    };
    auto run = [&] {
      if (path == "mpi") {
        comm->allreduce(t, ReduceOp::Sum);
      } else if (shm) {
        shm->reduce(0, count);
        shm->wait_readers();  // as before the next write to the buffer
      } else {
        comm->allreduce_sum_ordered(t, cfg.wire);
      }
    };
    for (int i = 0; i < warmup; ++i) run();
    std::vector<double> times;
    for (int i = 0; i < iters; ++i) {
      fill();
      comm->barrier();
      const auto t0 = std::chrono::steady_clock::now();
      run();
      const double local = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      // The collective takes as long as its slowest rank.
      Tensor d = Tensor::zeros(Shape{1}, DType::F64);
      d.data<double>()[0] = local;
      comm->allreduce(d, ReduceOp::Max);
      times.push_back(d.data<double>()[0]);
      if (i == iters - 1) {  // check the data of the last iteration
        int64_t wrong = 0;
        const float* p = t.data<float>();
        for (int64_t j = 0; j < count; ++j) {
          double expect = 0;
          for (int r = 0; r < N; ++r) expect += (r + j) % 7;
          wrong += p[j] != static_cast<float>(expect);
        }
        Tensor w = Tensor::zeros(Shape{1}, DType::I64);
        w.data<int64_t>()[0] = wrong;
        comm->allreduce(w, ReduceOp::Sum);
        std::sort(times.begin(), times.end());
        const double med = times[times.size() / 2];
        const double size = static_cast<double>(count) * 4;
        const double algbw = size / med / 1e9, busbw = algbw * 2.0 * (N - 1) / N;
        if (static_cast<int64_t>(size) == int64_t{4} << 20) bus_4mb = busbw;
        if (static_cast<int64_t>(size) == int64_t{256} << 20) bus_256mb = busbw;
        if (rank == 0) {
          std::printf("  %12.0f %12ld %10.1f %9.3f %9.3f %7ld\n", size, count, med * 1e6, algbw, busbw,
                      w.data<int64_t>()[0]);
          json += fmt::format("{}{{\"bytes\":{},\"us\":{:f},\"busbw\":{:f},\"wrong\":{}}}", json.size() > 1 ? "," : "",
                              count * 4, med * 1e6, busbw, w.data<int64_t>()[0]);
        }
      }
    }
  }
  if (rank == 0)
    std::printf(
        "{\"bench\":\"allreduce\",\"path\":\"%s\",\"wire\":\"%s\",\"ranks\":%d,\"busbw_256mb_over_4mb\":%.3f,\"sizes\":%s]}\n",
        path.c_str(), cfg.wire_name.c_str(), N, bus_4mb > 0 ? bus_256mb / bus_4mb : 0.0, json.c_str());
  return 0;
}
