// GPU collectives under mpirun: the NCCL communicator ([nccl], one GPU per
// rank), the MPI-staged allreduce ([staged], ranks may share a GPU), and the
// gradient reducer over each of them, with and without 16-bit compression,
// and --sync-batchnorm's statistics summed by NCCL on the device.
// Ranks contribute integer-valued, rank-dependent data, so sums are exact and
// are checked for equality against closed forms. Stream ordering is checked
// without kernels: a host function holds the compute stream shut (StreamGate)
// while the collective is queued behind it. Tests use CHECK, not REQUIRE,
// where a failure must not skip a collective the other ranks are waiting in.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/gpu_grad_reducer.h"
#include "comm/nccl_communicator.h"
#include "comm/staged_allreduce.h"
#include "cuda/caching_allocator.h"
#include "cuda/check.h"
#include "cuda/context.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "mpi_gpu_cases.h"
#include "mpi_world.h"
#include "nn/batchnorm.h"
#include "nn/parameter_store.h"
#include "reductions.h"

using namespace lockstep;
using lockstep::testing::max_rel_diff;
using lockstep::testing::nccl_case_can_run;
using lockstep::testing::random_vector;
using lockstep::testing::world;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// cudaMalloc'd memory for one test.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) { LS_CUDA_CHECK(cudaMalloc(&p_, bytes)); }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

// Page-locked host memory, so copies on a stream are truly asynchronous.
template <typename T>
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t n) : n_(n), p_(static_cast<T*>(alloc_.allocate(n * sizeof(T)))) {}
  ~PinnedBuffer() { alloc_.deallocate(p_, n_ * sizeof(T)); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  T* data() const { return p_; }
  T& operator[](size_t i) const { return p_[i]; }
  size_t bytes() const { return n_ * sizeof(T); }

 private:
  cuda::PinnedAllocator alloc_;
  size_t n_;
  T* p_;
};

// Holds a stream shut at the point it is made (a host function on the stream
// that waits for a flag) until release() or the releaser thread opens it.
// Kernel-free. Always opened by a timer (release_after), never only by the
// main thread: a CUDA call that synchronises the device while the gate is
// shut would otherwise wait forever. The destructor opens the gate and waits
// until the host function has returned.
class StreamGate {
 public:
  explicit StreamGate(const cuda::Stream& s) {
    LS_CUDA_CHECK(cudaLaunchHostFunc(s.get(), &StreamGate::hold, this));
  }
  ~StreamGate() {
    open_.store(true);
    if (releaser_.joinable()) releaser_.join();
    const auto t0 = Clock::now();
    while (!passed_.load() && seconds_since(t0) < 60) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;

  // Opens the gate `ms` after this call; returns when it was started.
  Clock::time_point release_after(int ms) {
    const auto t0 = Clock::now();
    releaser_ = std::thread([this, ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      open_.store(true);
    });
    return t0;
  }

 private:
  static void hold(void* self) {
    auto* g = static_cast<StreamGate*>(self);
    while (!g->open_.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    g->passed_.store(true);
  }
  std::atomic<bool> open_{false};
  std::atomic<bool> passed_{false};
  std::thread releaser_;
};

// Rank r's contribution at element i: (r + 1) * (i % 7 + 1), integers small
// enough that every partial sum is exact in bf16 up to 8 ranks.
float contribution(int r, int64_t i) { return static_cast<float>((r + 1) * (i % 7 + 1)); }
// Sum over n ranks: n (n + 1) / 2 * (i % 7 + 1).
double sum_of(int n, int64_t i) { return n * (n + 1) / 2.0 * static_cast<double>(i % 7 + 1); }

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

// Empty when every |got - want| / max(1, |want|) <= tol; otherwise the first
// element that is off and how many are (short, unlike printing the vectors).
std::string mismatch(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  if (got.size() != want.size()) return "sizes differ";
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(got[i] - want[i]) / std::max(1.0, std::abs(want[i]));
    if (!(d <= tol)) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++bad;
    }
  }
  if (!bad) return "";
  const size_t f = static_cast<size_t>(first);
  return std::to_string(bad) + " of " + std::to_string(got.size()) + " elements off; first at " +
         std::to_string(first) + ": got " + std::to_string(got[f]) + ", want " + std::to_string(want[f]);
}

int nccl_device() {
  Communicator& w = world();
  return cuda::select_device(w.local_rank(), w.local_size(), /*exclusive=*/true, "NCCL test");
}

// Uploads `host` into `dev` on `compute`, records `ready`, reduces with NCCL,
// makes `compute` wait for the result and downloads it.
template <typename T>
std::vector<T> nccl_roundtrip(NcclCommunicator& nccl, const cuda::Stream& compute, const std::vector<T>& host,
                              DType dtype, ReduceOp op) {
  const size_t bytes = host.size() * sizeof(T);
  DeviceBuffer dev(bytes);
  cuda::Event ready, done;
  LS_CUDA_CHECK(cudaMemcpyAsync(dev.get(), host.data(), bytes, cudaMemcpyHostToDevice, compute.get()));
  ready.record(compute);
  nccl.allreduce(dev.get(), static_cast<int64_t>(host.size()), dtype, op, &ready);
  nccl.record_done(done);
  done.wait_on(compute);
  std::vector<T> out(host.size());
  LS_CUDA_CHECK(cudaMemcpyAsync(out.data(), dev.get(), bytes, cudaMemcpyDeviceToHost, compute.get()));
  compute.synchronize();
  nccl.wait(60);
  return out;
}

}  // namespace

TEST_CASE("NCCL allreduce: sum and average in fp32 and bf16, exact", "[nccl]") {
  if (!nccl_case_can_run()) return;
  const int device = nccl_device();
  cuda::Stream compute;
  auto nccl = NcclCommunicator::create(world(), device);
  const int r = nccl->rank(), n = nccl->size();
  CHECK(n == world().size());
  CHECK(r == world().rank());
  CHECK(nccl->device() == device);
  CHECK_FALSE(nccl->blocking());
  // Average is exact when 1/n is (NCCL scales each contribution by 1/n).
  const double avg_tol = is_power_of_two(n) ? 0.0 : 1e-6;

  for (int64_t len : {int64_t{1}, int64_t{1000}, (int64_t{1} << 20) + 3}) {
    INFO("length " << len << ", " << n << " ranks");
    std::vector<float> x(static_cast<size_t>(len));
    std::vector<uint16_t> xb(x.size());
    for (int64_t i = 0; i < len; ++i) {
      x[static_cast<size_t>(i)] = contribution(r, i);
      xb[static_cast<size_t>(i)] = float_to_bf16(contribution(r, i));
    }
    std::vector<double> want_sum(x.size()), want_avg(x.size());
    for (int64_t i = 0; i < len; ++i) {
      want_sum[static_cast<size_t>(i)] = sum_of(n, i);
      want_avg[static_cast<size_t>(i)] = sum_of(n, i) / n;
    }

    const auto sum32 = nccl_roundtrip(*nccl, compute, x, DType::F32, ReduceOp::Sum);
    const auto avg32 = nccl_roundtrip(*nccl, compute, x, DType::F32, ReduceOp::Average);
    const auto sum16 = nccl_roundtrip(*nccl, compute, xb, DType::BF16, ReduceOp::Sum);
    const auto avg16 = nccl_roundtrip(*nccl, compute, xb, DType::BF16, ReduceOp::Average);
    std::vector<double> g_sum32(x.size()), g_avg32(x.size()), g_sum16(x.size()), g_avg16(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      g_sum32[i] = sum32[i];
      g_avg32[i] = avg32[i];
      g_sum16[i] = bf16_to_float(sum16[i]);
      g_avg16[i] = bf16_to_float(avg16[i]);
    }
    CHECK(mismatch(g_sum32, want_sum, 0.0) == "");  // exact
    CHECK(mismatch(g_avg32, want_avg, avg_tol) == "");
    // Every partial sum <= 252 up to 8 ranks: exact in bf16.
    CHECK(mismatch(g_sum16, want_sum, n <= 8 ? 0.0 : 1.0 / 128) == "");
    // bf16 average: exact for 1, 2 and 4 ranks (k * (n + 1) / 2 fits 8 bits).
    CHECK(mismatch(g_avg16, want_avg, n <= 4 && is_power_of_two(n) ? 0.0 : 1.0 / 128) == "");
  }
}

TEST_CASE("NCCL broadcast from rank 0 and from the last rank", "[nccl]") {
  if (!nccl_case_can_run()) return;
  const int device = nccl_device();
  cuda::Stream compute;
  auto nccl = NcclCommunicator::create(world(), device);
  const int r = nccl->rank(), n = nccl->size();
  const int64_t len = 100003;
  for (int root : {0, n - 1}) {
    INFO("root " << root);
    std::vector<float> x(static_cast<size_t>(len));
    std::vector<uint8_t> b(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i) {
      x[static_cast<size_t>(i)] = static_cast<float>(1000 * r + i % 100);
      b[static_cast<size_t>(i)] = static_cast<uint8_t>((r * 31 + i) % 251);
    }
    DeviceBuffer dx(x.size() * sizeof(float)), db(b.size());
    cuda::Event ready, done;
    LS_CUDA_CHECK(cudaMemcpyAsync(dx.get(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice,
                                  compute.get()));
    LS_CUDA_CHECK(cudaMemcpyAsync(db.get(), b.data(), b.size(), cudaMemcpyHostToDevice, compute.get()));
    ready.record(compute);
    nccl->broadcast(dx.get(), len, DType::F32, root, &ready);
    nccl->broadcast(db.get(), len, DType::U8, root, nullptr);  // stream order: after the first
    nccl->record_done(done);
    done.wait_on(compute);
    std::vector<float> y(x.size());
    std::vector<uint8_t> c(b.size());
    LS_CUDA_CHECK(cudaMemcpyAsync(y.data(), dx.get(), y.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                  compute.get()));
    LS_CUDA_CHECK(cudaMemcpyAsync(c.data(), db.get(), c.size(), cudaMemcpyDeviceToHost, compute.get()));
    compute.synchronize();
    nccl->wait(60);
    bool ok_f = true, ok_b = true;
    for (int64_t i = 0; i < len; ++i) {
      ok_f = ok_f && y[static_cast<size_t>(i)] == static_cast<float>(1000 * root + i % 100);
      ok_b = ok_b && c[static_cast<size_t>(i)] == static_cast<uint8_t>((root * 31 + i) % 251);
    }
    CHECK(ok_f);
    CHECK(ok_b);
  }
  CHECK_THROWS_AS(nccl->broadcast(nullptr, 1, DType::F32, n, nullptr), Error);  // no such root (local check)
}

TEST_CASE("NCCL allreduce runs after `ready`; the compute stream waits for record_done", "[nccl]") {
  if (!nccl_case_can_run()) return;
  const int device = nccl_device();
  cuda::Stream compute;
  auto nccl = NcclCommunicator::create(world(), device);
  const int r = nccl->rank(), n = nccl->size();
  const int64_t len = int64_t{1} << 22;  // 16 MB
  const size_t bytes = static_cast<size_t>(len) * sizeof(float);
  PinnedBuffer<float> src(static_cast<size_t>(len)), out(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) src[static_cast<size_t>(i)] = contribution(r, i);
  DeviceBuffer dev(bytes);
  cuda::Event ready, done;

  // Warm-up: connections are set up by the first collective, not under the gate.
  nccl->allreduce(dev.get(), len, DType::F32, ReduceOp::Sum, nullptr);
  nccl->wait(60);

  {
    StreamGate gate(compute);  // compute is held here ...
    // ... so this poison, the real data and `ready` all wait behind it
    LS_CUDA_CHECK(cudaMemsetAsync(dev.get(), 0xff, bytes, compute.get()));  // NaNs if read early
    LS_CUDA_CHECK(cudaMemcpyAsync(dev.get(), src.data(), bytes, cudaMemcpyHostToDevice, compute.get()));
    ready.record(compute);
    const auto opened_at = gate.release_after(500);
    nccl->allreduce(dev.get(), len, DType::F32, ReduceOp::Sum, &ready);
    nccl->record_done(done);
    done.wait_on(compute);
    LS_CUDA_CHECK(cudaMemcpyAsync(out.data(), dev.get(), bytes, cudaMemcpyDeviceToHost, compute.get()));
    if (seconds_since(opened_at) < 0.4) {
      // Still shut: nothing after the gate can have run.
      CHECK_FALSE(done.query());
      CHECK_FALSE(nccl->stream().query());
    }
    nccl->wait(60);  // returns once the gate opened and the allreduce ran
    CHECK(seconds_since(opened_at) >= 0.45);
    compute.synchronize();
  }
  bool ok = true;
  for (int64_t i = 0; i < len; ++i) ok = ok && out[static_cast<size_t>(i)] == static_cast<float>(sum_of(n, i));
  CHECK(ok);
}

TEST_CASE("NCCL wait() returns promptly once the work is done; abort() is idempotent", "[nccl]") {
  if (!nccl_case_can_run()) return;
  const int device = nccl_device();
  auto nccl = NcclCommunicator::create(world(), device);
  const int64_t len = int64_t{1} << 20;
  DeviceBuffer dev(static_cast<size_t>(len) * sizeof(float));
  LS_CUDA_CHECK(cudaMemset(dev.get(), 0, static_cast<size_t>(len) * sizeof(float)));
  LS_CUDA_CHECK(cudaDeviceSynchronize());  // the memset ran on the legacy stream

  auto t0 = Clock::now();
  nccl->wait(30);  // nothing queued
  CHECK(seconds_since(t0) < 0.05);

  nccl->allreduce(dev.get(), len, DType::F32, ReduceOp::Sum, nullptr);
  nccl->wait(60);
  t0 = Clock::now();
  nccl->wait(30);  // done already
  nccl->wait(0);   // no limit, nothing pending
  CHECK(seconds_since(t0) < 0.05);

  // wait() really waits: the allreduce is held behind a shut stream.
  {
    cuda::Stream held;
    cuda::Event ready;
    StreamGate gate(held);
    ready.record(held);
    const auto opened_at = gate.release_after(300);
    nccl->allreduce(dev.get(), len, DType::F32, ReduceOp::Max, &ready);
    nccl->wait(60);
    const double waited = seconds_since(opened_at);
    CHECK(waited >= 0.25);
    CHECK(waited < 30);
  }

  CHECK_FALSE(nccl->aborted());
  nccl->abort();
  CHECK(nccl->aborted());
  CHECK(nccl->handle() == nullptr);
  nccl->abort();  // again: nothing happens
  CHECK(nccl->aborted());
  CHECK_THROWS_AS(nccl->allreduce(dev.get(), len, DType::F32, ReduceOp::Sum, nullptr), Error);
  CHECK_THROWS_AS(nccl->wait(1), Error);
  nccl.reset();  // destructor after abort: no finalize, no throw
}

TEST_CASE("NCCL blocking and non-blocking communicators agree; fp64, fp16, min, max", "[nccl]") {
  if (!nccl_case_can_run()) return;
  const int device = nccl_device();
  cuda::Stream compute;
  const int r = world().rank(), n = world().size();
  const int64_t len = 4099;
  for (bool blocking : {true, false}) {
    INFO("blocking " << blocking);
    NcclCommunicator::Options options;
    options.blocking = blocking;
    options.timeout_s = 120;
    auto nccl = NcclCommunicator::create(world(), device, options);
    CHECK(nccl->blocking() == blocking);

    std::vector<double> x64(static_cast<size_t>(len));
    std::vector<uint16_t> x16(static_cast<size_t>(len));
    std::vector<float> xm(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i) {
      x64[static_cast<size_t>(i)] = 1e12 * (r + 1) + static_cast<double>(i);  // beyond fp32's integers
      x16[static_cast<size_t>(i)] = float_to_f16(contribution(r, i));
      xm[static_cast<size_t>(i)] = static_cast<float>((i % 2 ? 1 : -1) * (r + 1) * (i % 5));
    }
    const auto s64 = nccl_roundtrip(*nccl, compute, x64, DType::F64, ReduceOp::Sum);
    const auto s16 = nccl_roundtrip(*nccl, compute, x16, DType::F16, ReduceOp::Sum);
    const auto mn = nccl_roundtrip(*nccl, compute, xm, DType::F32, ReduceOp::Min);
    const auto mx = nccl_roundtrip(*nccl, compute, xm, DType::F32, ReduceOp::Max);
    bool ok64 = true, ok16 = true, okmin = true, okmax = true;
    for (int64_t i = 0; i < len; ++i) {
      const size_t k = static_cast<size_t>(i);
      ok64 = ok64 && s64[k] == 1e12 * n * (n + 1) / 2 + static_cast<double>(n) * static_cast<double>(i);
      ok16 = ok16 && static_cast<double>(f16_to_float(s16[k])) == sum_of(n, i);
      const float lo = static_cast<float>((i % 2 ? 1 : -1) * (i % 5));  // rank 0's entry: |.| smallest
      const float hi = static_cast<float>((i % 2 ? 1 : -1) * n * (i % 5));  // rank n-1's
      okmin = okmin && mn[k] == (i % 2 ? lo : hi);
      okmax = okmax && mx[k] == (i % 2 ? hi : lo);
    }
    CHECK(ok64);
    CHECK(ok16);
    CHECK(okmin);
    CHECK(okmax);
  }
}

// The timeout path on purpose: a collective held behind a shut stream,
// wait() with a short limit. Hidden (run it explicitly with
// "[nccl_timeout]" at one rank): it aborts a communicator with work queued,
// which NCCL supports but which should not share a process with other cases.
TEST_CASE("NCCL wait() past its limit aborts and says so", "[.][nccl_timeout]") {
  if (!nccl_case_can_run()) return;
  const int device = nccl_device();
  auto nccl = NcclCommunicator::create(world(), device);
  const int64_t len = 1 << 16;
  DeviceBuffer dev(static_cast<size_t>(len) * sizeof(float));
  nccl->allreduce(dev.get(), len, DType::F32, ReduceOp::Sum, nullptr);  // warm-up
  nccl->wait(60);
  cuda::Stream held;
  cuda::Event ready;
  StreamGate gate(held);
  ready.record(held);
  gate.release_after(3000);  // opens even while ncclCommAbort waits for the device
  nccl->allreduce(dev.get(), len, DType::F32, ReduceOp::Sum, &ready);
  const auto t0 = Clock::now();
  try {
    nccl->wait(0.2);
    FAIL("wait() returned with the allreduce still held");
  } catch (const Error& e) {
    const std::string what = e.message();
    INFO(what);
    CHECK(what.find("did not finish within 0.2 s") != std::string::npos);
    CHECK(what.find("communicator aborted") != std::string::npos);
  }
  CHECK(seconds_since(t0) >= 0.2);
  CHECK(nccl->aborted());
}

TEST_CASE("staged allreduce matches the host MPI allreduce", "[staged]") {
  lockstep::testing::note_case_ran();
  Communicator& w = world();
  cuda::select_device(w.local_rank(), w.local_size(), /*exclusive=*/false, "staged test");
  const int r = w.rank();
  StagedAllreduce staged;
  cuda::Stream compute;
  size_t capacity_after_first_pass = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Min, ReduceOp::Max}) {
      for (int64_t len : {int64_t{1}, int64_t{1000}, int64_t{1} << 20, (int64_t{3} << 20) + 5}) {
        INFO("pass " << pass << ", op " << static_cast<int>(op) << ", length " << len);
        std::vector<float> x(static_cast<size_t>(len));
        for (int64_t i = 0; i < len; ++i) {
          x[static_cast<size_t>(i)] = (i % 3 ? 1.f : -1.f) * contribution(r, i) + 0.25f * static_cast<float>(i % 4);
        }
        // Reference: the host communicator on a CPU copy.
        Tensor want = Tensor::from_vector(Shape{len}, x);
        w.allreduce(want, op);

        DeviceBuffer dev(x.size() * sizeof(float));
        cuda::Event ready, done;
        LS_CUDA_CHECK(cudaMemcpyAsync(dev.get(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice,
                                      compute.get()));
        ready.record(compute);
        staged.allreduce(w, dev.get(), len, op, &ready);
        staged.record_done(done);
        done.wait_on(compute);
        std::vector<float> got(x.size());
        LS_CUDA_CHECK(cudaMemcpyAsync(got.data(), dev.get(), got.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                      compute.get()));
        compute.synchronize();
        CHECK(std::memcmp(got.data(), want.raw_data(), want.nbytes()) == 0);  // bitwise: same MPI reduction
      }
    }
    if (pass == 0) capacity_after_first_pass = staged.capacity_bytes();
  }
  CHECK(capacity_after_first_pass >= ((size_t{3} << 20) + 5) * sizeof(float));
  CHECK(staged.capacity_bytes() == capacity_after_first_pass);  // no growth once warm
  staged.allreduce(w, nullptr, 0, ReduceOp::Sum, nullptr);      // empty: nothing to do
}

TEST_CASE("staged allreduce runs after `ready`; the compute stream waits for record_done", "[staged]") {
  lockstep::testing::note_case_ran();
  Communicator& w = world();
  cuda::select_device(w.local_rank(), w.local_size(), /*exclusive=*/false, "staged test");
  const int r = w.rank(), n = w.size();
  StagedAllreduce staged;
  cuda::Stream compute;
  const int64_t len = int64_t{1} << 22;
  const size_t bytes = static_cast<size_t>(len) * sizeof(float);
  PinnedBuffer<float> src(static_cast<size_t>(len)), out(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) src[static_cast<size_t>(i)] = contribution(r, i);
  DeviceBuffer dev(bytes);
  cuda::Event ready, done;
  {
    StreamGate gate(compute);
    LS_CUDA_CHECK(cudaMemsetAsync(dev.get(), 0xff, bytes, compute.get()));  // NaNs if read early
    LS_CUDA_CHECK(cudaMemcpyAsync(dev.get(), src.data(), bytes, cudaMemcpyHostToDevice, compute.get()));
    ready.record(compute);
    const auto opened_at = gate.release_after(300);
    staged.allreduce(w, dev.get(), len, ReduceOp::Sum, &ready);  // blocks until the gate opens
    CHECK(seconds_since(opened_at) >= 0.25);
    staged.record_done(done);
    done.wait_on(compute);
    LS_CUDA_CHECK(cudaMemcpyAsync(out.data(), dev.get(), bytes, cudaMemcpyDeviceToHost, compute.get()));
    compute.synchronize();
  }
  bool ok = true;
  for (int64_t i = 0; i < len; ++i) ok = ok && out[static_cast<size_t>(i)] == static_cast<float>(sum_of(n, i));
  CHECK(ok);
}

namespace {

// Rank r's gradient at element i: not representable in 16 bits, so a 16-bit
// wire must round it.
float gradient(int r, int64_t i) { return (static_cast<float>(r) + 1.f) * (1.f + static_cast<float>(i % 97) / 1000.f); }

// Two training-like steps of a GpuGradReducer over `grads` (3 buckets, the
// middle one large), gradients made final bucket by bucket; returns the
// reduced buffer after the second step and the reducer's grad_scale().
std::vector<float> reduce_two_steps(cuda::Context& ctx, NcclCommunicator* nccl, WireType wire, float* scale) {
  Communicator& w = world();
  const int64_t len = (int64_t{1} << 20) + 1003;
  std::vector<Bucket> buckets{{0, 1000}, {1000, 1000 + (int64_t{1} << 20)}, {1000 + (int64_t{1} << 20), len}};
  Tensor grads = Tensor::zeros(Shape{len}, DType::F32, ctx.allocator());
  GpuGradReducer::Options o;
  o.wire = wire;
  o.timeout_s = 60;
  GpuGradReducer reducer(ctx, w, nccl, grads, buckets, o);
  std::vector<float> x(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) x[static_cast<size_t>(i)] = gradient(w.rank(), i);
  for (int step = 0; step < 2; ++step) {
    reducer.arm();
    copy_from_host(grads, x.data());  // "backward": every gradient written on the host's order
    for (const Bucket& b : buckets) reducer.ready(b.end);
    reducer.finish();
  }
  reducer.drain();
  ctx.synchronize();
  *scale = reducer.grad_scale();
  return grads.to_vector();
}

}  // namespace

TEST_CASE("GPU gradient reducer over NCCL: fp32, bf16 and fp16 on the wire", "[nccl]") {
  if (!nccl_case_can_run()) return;
  cuda::Context ctx(nccl_device());
  auto nccl = NcclCommunicator::create(world(), ctx.device());
  const int n = nccl->size();
  for (WireType wire : {WireType::F32, WireType::BF16, WireType::F16}) {
    INFO("wire " << static_cast<int>(wire) << ", " << n << " ranks");
    float scale = 0;
    const std::vector<float> got = reduce_two_steps(ctx, nccl.get(), wire, &scale);
    CHECK(scale == 1.f);  // ncclAvg averaged
    // Want: the average of the contributions, each rounded to the wire type
    // first; NCCL's 16-bit additions round again along the way (one 16-bit
    // ulp per partial sum at most), exact for one rank.
    const double ulp = wire == WireType::BF16 ? 1.0 / 128 : wire == WireType::F16 ? 1.0 / 1024 : 1e-6;
    const double tol = n == 1 ? 0.0 : ulp * n;
    std::vector<double> gotd(got.begin(), got.end()), want(got.size(), 0.0);
    for (int r = 0; r < n; ++r) {
      std::vector<float> x(got.size());
      for (size_t i = 0; i < x.size(); ++i) x[i] = gradient(r, static_cast<int64_t>(i));
      Tensor v = Tensor::from_vector(Shape{static_cast<int64_t>(x.size())}, x);
      round_to_wire(v, wire);
      for (size_t i = 0; i < x.size(); ++i) want[i] += v.data<float>()[i] / static_cast<double>(n);
    }
    CHECK(mismatch(gotd, want, tol) == "");
    if (wire != WireType::F32) {
      // Compression rounds: some element differs from the fp32 average.
      bool rounded = false;
      for (size_t i = 0; i < got.size() && !rounded; ++i) {
        double avg = 0;
        for (int r = 0; r < n; ++r) avg += gradient(r, static_cast<int64_t>(i));
        rounded = got[i] != static_cast<float>(avg / n);
      }
      CHECK(rounded);
    }
  }
}

TEST_CASE("GPU gradient reducer staged through MPI: a 16-bit wire sums exactly as the CPU path", "[staged]") {
  lockstep::testing::note_case_ran();
  Communicator& w = world();
  cuda::Context ctx(cuda::select_device(w.local_rank(), w.local_size(), /*exclusive=*/false, "staged test"));
  for (WireType wire : {WireType::F32, WireType::BF16, WireType::F16}) {
    INFO("wire " << static_cast<int>(wire) << ", " << w.size() << " ranks");
    float scale = 0;
    const std::vector<float> got = reduce_two_steps(ctx, nullptr, wire, &scale);
    CHECK(scale == 1.f / static_cast<float>(w.size()));  // summed; the optimizer averages
    // Reference: the CPU path's reductions on host copies of the same gradients.
    std::vector<float> x(got.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = gradient(w.rank(), static_cast<int64_t>(i));
    Tensor want = Tensor::from_vector(Shape{static_cast<int64_t>(x.size())}, x);
    if (wire == WireType::F32)
      w.allreduce(want, ReduceOp::Sum);
    else
      w.allreduce_sum_ordered(want, wire);
    CHECK(std::memcmp(got.data(), want.raw_data(), want.nbytes()) == 0);  // bitwise
  }
}

TEST_CASE("sync batch norm: statistics summed by NCCL on the device equal the host path", "[nccl]") {
  if (!nccl_case_can_run()) return;
  Communicator& w = world();
  cuda::Context ctx(nccl_device());
  auto nccl = NcclCommunicator::create(w, ctx.device());
  CollectiveTracker tracker;
  CommStatsReducer via_nccl(w, tracker, nccl.get()), via_host(w, tracker);
  const int64_t N = 3 + w.rank(), C = 5, H = 6, W = 7;  // uneven shards: counts differ by rank
  const Shape xs{N, C, H, W};

  // Two identical GPU layers, one per reducer.
  struct Replica {
    BatchNorm2d bn{5, 1e-5f, 0.1f};
    ParameterStore params, buffers;
  };
  std::vector<std::unique_ptr<Replica>> reps;
  for (int k = 0; k < 2; ++k) {
    auto r = std::make_unique<Replica>();
    r->bn.declare(r->params, "bn.");
    r->bn.declare_buffers(r->buffers, "bn.");
    r->params.finalize();
    r->buffers.finalize();
    r->params.to(ctx.allocator());
    r->buffers.to(ctx.allocator());
    reps.push_back(std::move(r));
  }
  StatsReducer* reducers[2] = {&via_nccl, &via_host};
  for (int step = 0; step < 2; ++step) {
    CAPTURE(step, w.rank());
    const uint64_t seed = 100 + 10 * static_cast<uint64_t>(w.rank()) + static_cast<uint64_t>(step);
    const Tensor x = Tensor::from_vector(xs, random_vector(xs.numel(), seed, -2.f, 3.f)).to(ctx.allocator());
    const Tensor dy = Tensor::from_vector(xs, random_vector(xs.numel(), seed + 5)).to(ctx.allocator());
    std::vector<std::vector<float>> y(2), dx(2), grads(2), running(2);
    for (int k = 0; k < 2; ++k) {
      Tensor yt = Tensor::zeros(xs, DType::F32, ctx.allocator()), dxt = Tensor::zeros(xs, DType::F32, ctx.allocator());
      Tensor dyt = dy.to(ctx.allocator());
      ForwardContext fc;
      fc.gpu = &ctx;
      fc.sync = reducers[k];
      reps[k]->bn.forward(x, yt, fc);
      BackwardContext bc;
      bc.gpu = &ctx;
      bc.sync = reducers[k];
      reps[k]->bn.backward(x, yt, dyt, &dxt, bc);
      ctx.synchronize();
      y[k] = yt.to_vector();
      dx[k] = dxt.to_vector();
      grads[k] = reps[k]->params.grads().to_vector();
      running[k] = reps[k]->buffers.values().to_vector();
    }
    nccl->wait(60);
    // Both sum in fp64; over NCCL the order of the rank sums may differ.
    CHECK(max_rel_diff(y[0], y[1]) <= 1e-6);
    CHECK(max_rel_diff(dx[0], dx[1]) <= 1e-6);
    CHECK(max_rel_diff(grads[0], grads[1]) <= 1e-6);
    CHECK(max_rel_diff(running[0], running[1]) <= 1e-6);
  }
}
