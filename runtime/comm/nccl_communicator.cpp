// NCCL communicator: bootstrap over the host Communicator, collectives on a
// high-priority stream ordered by events, bounded waits that abort.
#include "comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/device.h"

// Non-blocking communicators, ncclCommInitRankConfig and ncclCommFinalize
// arrived in NCCL 2.14.
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
#define LS_NCCL_HAS_CONFIG 1
#else
#define LS_NCCL_HAS_CONFIG 0
#endif

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    case DType::F64: return ncclFloat64;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    case DType::U8: return ncclUint8;
  }
  LS_THROW("no NCCL type for dtype {}", static_cast<int>(t));
}

bool is_floating(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64; }

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Average: return ncclAvg;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Max: return ncclMax;
  }
  return ncclSum;
}

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Average: return "average";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
  }
  return "?";
}

// "NCCL error 6 (remote process exited or there was a network error): <last error>"
std::string nccl_error_text(ncclResult_t r, ncclComm_t comm) {
  std::string s = fmt::format("NCCL error {} ({})", static_cast<int>(r), ncclGetErrorString(r));
  const char* last = ncclGetLastError(comm);
  if (last && *last) s += fmt::format(": {}", last);
  return s;
}

// Polling: spin (yield) briefly, since a queued call normally leaves
// ncclInProgress within microseconds, then back off to `slow`.
class Poller {
 public:
  explicit Poller(std::chrono::microseconds slow) : slow_(slow) {}
  void pause() {
    if (++spins_ < 200) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(slow_);
    }
  }

 private:
  std::chrono::microseconds slow_;
  int spins_ = 0;
};

}  // namespace

NcclCommunicator::NcclCommunicator(int rank, int size, int device, Options options, int stream_priority)
    : rank_(rank), size_(size), device_(device), options_(options), stream_(stream_priority) {}

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(Communicator& bootstrap, int device) {
  return create(bootstrap, device, Options{});
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(Communicator& bootstrap, int device, Options options) {
  const int rank = bootstrap.rank(), size = bootstrap.size();

  // 1. Rank 0 makes the unique id; one broadcast of [ok byte | 128-byte id],
  //    so a failure on rank 0 reaches every rank instead of leaving them
  //    waiting in the broadcast.
  Tensor msg = Tensor::zeros(Shape{1 + static_cast<int64_t>(NCCL_UNIQUE_ID_BYTES)}, DType::U8);
  uint8_t* bytes = msg.data<uint8_t>();
  std::string id_error;
  if (rank == 0) {
    ncclUniqueId id;
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r == ncclSuccess) {
      bytes[0] = 1;
      std::memcpy(bytes + 1, &id, sizeof id);
    } else {
      id_error = nccl_error_text(r, nullptr);
    }
  }
  bootstrap.broadcast(msg, 0);
  if (bytes[0] != 1) {
    LS_THROW("NCCL communicator: rank 0 could not create the NCCL unique id{}",
             id_error.empty() ? std::string() : ": " + id_error);
  }
  ncclUniqueId id;
  std::memcpy(&id, bytes + 1, sizeof id);

  // 2. Every rank joins on its device. Any failure is caught and kept, so
  //    every rank reaches step 3.
  std::unique_ptr<NcclCommunicator> c;
  std::string error;
  try {
    LS_CUDA_CHECK(cudaSetDevice(device));
    int least = 0, greatest = 0;  // greatest = highest priority (numerically lowest)
    LS_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    c.reset(new NcclCommunicator(rank, size, device, options, greatest));

    ncclComm_t comm = nullptr;
#if LS_NCCL_HAS_CONFIG
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = options.blocking ? 1 : 0;
    ncclResult_t r = ncclCommInitRankConfig(&comm, size, id, rank, &config);
#else
    ncclResult_t r = ncclCommInitRank(&comm, size, id, rank);
#endif
    c->comm_ = comm;  // owned from here (NCCL keeps it allocated after a failed init: abort frees it)
    if (r != ncclSuccess && r != ncclInProgress) {
      error = fmt::format("ncclCommInitRank on cuda:{} failed: {}", device, nccl_error_text(r, comm));
    } else {
      c->wait_enqueued("init");  // polls the non-blocking init; throws (aborting) on error or timeout
    }
  } catch (const Error& e) {
    error = e.message();
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!error.empty() && c) c->abort();

  // 3. Agreement: every rank learns whether every other rank succeeded.
  const std::vector<std::string> errors = allgather_strings(bootstrap, error);
  std::string failed;
  for (int r = 0; r < size; ++r) {
    if (errors[static_cast<size_t>(r)].empty()) continue;
    failed += fmt::format("{}rank {}: {}", failed.empty() ? "" : "; ", r, errors[static_cast<size_t>(r)]);
  }
  if (!failed.empty()) {
    if (c) c->abort();
    LS_THROW("NCCL communicator over {} ranks could not be created ({})", size, failed);
  }
  return c;
}

NcclCommunicator::~NcclCommunicator() {
  if (!comm_ || aborted_) return;
  try {
    cuda::DeviceGuard guard(device_);
#if LS_NCCL_HAS_CONFIG
    // Finalize flushes queued work; non-blocking, it is polled under the
    // timeout, and a finalize that errs or does not finish becomes an abort.
    ncclResult_t r = ncclCommFinalize(comm_);
    const auto t0 = Clock::now();
    Poller poll(std::chrono::microseconds(1000));
    while (r == ncclInProgress) {
      if (options_.timeout_s > 0 && seconds_since(t0) > options_.timeout_s) break;
      poll.pause();
      if (ncclCommGetAsyncError(comm_, &r) != ncclSuccess) r = ncclInternalError;
    }
    if (r != ncclSuccess) {
      abort();
      return;
    }
#endif
    ncclCommDestroy(comm_);
    comm_ = nullptr;
  } catch (...) {
    abort();
  }
}

void NcclCommunicator::abort() noexcept {
  if (aborted_) return;
  aborted_ = true;
  if (comm_) {
    // ncclCommAbort always runs to completion (NCCL treats it as blocking even
    // for a non-blocking communicator): kernels waiting on peers quit, and the
    // communicator is freed.
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }
}

void NcclCommunicator::fail_and_abort(const std::string& message, const char* file, int line) {
  abort();
  throw_error(file, line, message);
}

void NcclCommunicator::check_usable(const char* what) const {
  LS_CHECK(!aborted_ && comm_, "NCCL {} on rank {}: the communicator was aborted", what, rank_);
}

void NcclCommunicator::wait_enqueued(const char* what) {
  const auto t0 = Clock::now();
  Poller poll(std::chrono::microseconds(100));
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess) state = r;
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      fail_and_abort(fmt::format("NCCL {} failed on rank {} of {} (cuda:{}): {}; communicator aborted", what, rank_,
                                 size_, device_, nccl_error_text(state, comm_)),
                     __FILE__, __LINE__);
    }
    if (options_.timeout_s > 0 && seconds_since(t0) > options_.timeout_s) {
      fail_and_abort(fmt::format("NCCL {} on rank {} of {} (cuda:{}) did not complete within {} s: communicator "
                                 "aborted so peers fail instead of hanging",
                                 what, rank_, size_, device_, options_.timeout_s),
                     __FILE__, __LINE__);
    }
    poll.pause();
  }
}

void NcclCommunicator::allreduce(void* buf, int64_t count, DType dtype, ReduceOp op, const cuda::Event* ready) {
  check_usable("allreduce");
  LS_CHECK(count >= 0, "NCCL allreduce of {} elements", count);
  LS_CHECK(is_floating(dtype) || ((dtype == DType::I32 || dtype == DType::I64) && op != ReduceOp::Average),
           "NCCL allreduce ({}) of {} is not supported", op_name(op), dtype_name(dtype));
  if (count == 0) return;  // same on every rank: nothing to exchange
  if (ready) ready->wait_on(stream_);
  last_op_ = "allreduce";
  last_detail_ = fmt::format("{} of {} {} elements", op_name(op), count, dtype_name(dtype));
  ++queued_since_wait_;
  const ncclResult_t r = ncclAllReduce(buf, buf, static_cast<size_t>(count), nccl_type(dtype), nccl_op(op), comm_,
                                       stream_.get());
  if (r != ncclSuccess && r != ncclInProgress) {
    fail_and_abort(fmt::format("NCCL {} ({}) could not be queued on rank {} of {} (cuda:{}): {}; communicator aborted",
                               last_op_, last_detail_, rank_, size_, device_, nccl_error_text(r, comm_)),
                   __FILE__, __LINE__);
  }
  // Non-blocking: the kernel is on the stream only once the state leaves
  // ncclInProgress; nothing else may touch the comm or the stream before.
  wait_enqueued("allreduce");
}

void NcclCommunicator::broadcast(void* buf, int64_t count, DType dtype, int root, const cuda::Event* ready) {
  check_usable("broadcast");
  LS_CHECK(count >= 0, "NCCL broadcast of {} elements", count);
  LS_CHECK(root >= 0 && root < size_, "NCCL broadcast from rank {} in a communicator of {}", root, size_);
  if (count == 0) return;
  if (ready) ready->wait_on(stream_);
  last_op_ = "broadcast";
  last_detail_ = fmt::format("{} {} elements from rank {}", count, dtype_name(dtype), root);
  ++queued_since_wait_;
  const ncclResult_t r =
      ncclBroadcast(buf, buf, static_cast<size_t>(count), nccl_type(dtype), root, comm_, stream_.get());
  if (r != ncclSuccess && r != ncclInProgress) {
    fail_and_abort(fmt::format("NCCL {} ({}) could not be queued on rank {} of {} (cuda:{}): {}; communicator aborted",
                               last_op_, last_detail_, rank_, size_, device_, nccl_error_text(r, comm_)),
                   __FILE__, __LINE__);
  }
  wait_enqueued("broadcast");
}

void NcclCommunicator::record_done(const cuda::Event& e) const {
  check_usable("record_done");
  e.record(stream_);
}

void NcclCommunicator::wait(double timeout_seconds) { wait_for(nullptr, timeout_seconds); }

void NcclCommunicator::wait(const cuda::Event& e, double timeout_seconds) { wait_for(e.get(), timeout_seconds); }

void NcclCommunicator::wait_for(cudaEvent_t event, double timeout_seconds) {
  check_usable("wait");
  const auto t0 = Clock::now();
  Poller poll(std::chrono::microseconds(1000));
  for (;;) {
    const cudaError_t e = event ? cudaEventQuery(event) : cudaStreamQuery(stream_.get());
    if (e != cudaSuccess) (void)cudaGetLastError();  // "not ready" is no error: keep it out of the error state
    if (e != cudaSuccess && e != cudaErrorNotReady) {
      fail_and_abort(fmt::format("NCCL {} failed: CUDA error {} ({}: {}) on the communication stream; communicator "
                                 "aborted ({}; rank {} of {}, cuda:{})",
                                 last_op_, static_cast<int>(e), cudaGetErrorName(e), cudaGetErrorString(e),
                                 last_detail_, rank_, size_, device_),
                     __FILE__, __LINE__);
    }
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess) state = r;
    if (state != ncclSuccess && state != ncclInProgress) {
      fail_and_abort(fmt::format("NCCL {} failed: {}; communicator aborted so peers fail instead of hanging ({}; "
                                 "rank {} of {}, cuda:{})",
                                 last_op_, nccl_error_text(state, comm_), last_detail_, rank_, size_, device_),
                     __FILE__, __LINE__);
    }
    if (e == cudaSuccess) {
      if (!event) queued_since_wait_ = 0;
      return;
    }
    if (timeout_seconds > 0 && seconds_since(t0) > timeout_seconds) {
      fail_and_abort(fmt::format("NCCL {} did not finish within {} s: communicator aborted so peers fail instead of "
                                 "hanging ({}; rank {} of {}, cuda:{}; {} call{} queued since the last wait)",
                                 last_op_, timeout_seconds, last_detail_, rank_, size_, device_, queued_since_wait_,
                                 queued_since_wait_ == 1 ? "" : "s"),
                     __FILE__, __LINE__);
    }
    poll.pause();
  }
}

}  // namespace lockstep
