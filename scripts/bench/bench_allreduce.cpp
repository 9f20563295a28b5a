// bench_allreduce: allreduce sweep in the nccl-tests style, run under mpirun.
//   mpirun -np 2 bench_allreduce -b 4 -e 256M -f 2 [--path mpi|lockstep] [-w 5] [-n 20]
// For each size from -b to -e bytes (x -f): warm-up, then timed in-place sums
// of fp32 data; columns size, count, time (us, median over ranks' max),
// algbw = size / time, busbw = algbw * 2(N-1)/N (GB/s), and #wrong: elements
// that differ from the closed-form sum (inputs are small integers, exact in
// fp32). --path mpi is MPI_Allreduce; ordered is lockstep's message-passing
// ordered allreduce; shm is lockstep's shared-memory path (ranks on one host;
// the buffer then lives in the host's shared window). The buffer is allocated
// once and touched before timing.
// Last line: JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_session.h"
#include "comm/shm_allreduce.h"
#include "core/error.h"

using namespace lockstep;

namespace {
int64_t parse_size(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  const std::string unit(end);
  if (unit == "K" || unit == "k") v *= 1024;
  if (unit == "M" || unit == "m") v *= 1024 * 1024;
  if (unit == "G" || unit == "g") v *= 1024.0 * 1024 * 1024;
  return static_cast<int64_t>(v);
}
}  // namespace

int main(int argc, char** argv) {
  MpiSession mpi(&argc, &argv);
  auto comm = mpi.world();
  int64_t lo = 4, hi = int64_t{256} << 20;
  double factor = 2;
  int warmup = 5, iters = 20;
  std::string path = "mpi";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "-b") lo = parse_size(v);
    else if (k == "-e") hi = parse_size(v);
    else if (k == "-f") factor = std::stod(v);
    else if (k == "-w") warmup = std::stoi(v);
    else if (k == "-n") iters = std::stoi(v);
    else if (k == "--path") path = v;
  }
  const int rank = comm->rank(), N = comm->size();
  const int64_t max_count = std::max<int64_t>(1, hi / 4);
  Tensor buf;
  std::unique_ptr<ShmAllreduce> shm;
  if (path == "shm") {
    auto mem = comm->allocate_shared(ShmAllreduce::kHeaderBytes + max_count * 4);
    LS_CHECK(mem != nullptr, "--path shm needs every rank on one host");
    shm = std::make_unique<ShmAllreduce>(mem, rank);
    buf = Tensor::zeros(Shape{max_count}, DType::F32, std::make_shared<BorrowedAllocator>(shm->data(rank), max_count * 4, mem));
  } else {
    buf = Tensor::zeros(Shape{max_count});  // zero-filled: every page touched
  }
  if (rank == 0) {
    std::printf("# lockstep allreduce sweep: %d ranks, path %s, fp32 sum in place, %d warm-up + %d timed\n", N,
                path.c_str(), warmup, iters);
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
        comm->allreduce_sum_ordered(t, WireType::F32);
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
    std::printf("{\"bench\":\"allreduce\",\"path\":\"%s\",\"ranks\":%d,\"busbw_256mb_over_4mb\":%.3f,\"sizes\":%s]}\n",
                path.c_str(), N, bus_4mb > 0 ? bus_256mb / bus_4mb : 0.0, json.c_str());
  return 0;
}
