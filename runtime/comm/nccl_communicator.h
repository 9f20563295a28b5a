// NcclCommunicator: collectives over GPU memory with NCCL, one GPU per rank,
// bootstrapped through the host Communicator (MPI).
//
// Ordering is by CUDA events, never by synchronising the host: the caller
// records `ready` on its compute stream after producing a buffer, the
// communicator's own high-priority stream waits on it and runs the collective,
// and record_done() gives back an event the compute stream waits on. wait()
// is the one place the host blocks, and it is bounded: on an asynchronous
// NCCL error or a timeout the communicator is aborted (ncclCommAbort) and
// lockstep::Error names what happened, so a lost or stuck peer ends the job
// instead of hanging it.
//
// The communicator is non-blocking by default (ncclConfig_t::blocking = 0):
// init and every call return at once, and the state is polled with
// ncclCommGetAsyncError under a timeout; a blocking one is available for
// comparison (Options::blocking). Every rank must make the same calls in the
// same order. Not thread-safe: one thread drives a communicator.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "cuda/stream.h"
#include "tensor/dtype.h"

struct ncclComm;  // nccl.h: typedef struct ncclComm* ncclComm_t

namespace lockstep {

class NcclCommunicator {
 public:
  struct Options {
    // Non-blocking NCCL (init, enqueue and finalize can be timed out and
    // aborted). true: plain blocking calls (init and finalize wait as long
    // as NCCL does).
    bool blocking = false;
    // Limit on init and on waiting for a call to be enqueued, and on the
    // finalize in the destructor (non-blocking mode only); <= 0: no limit.
    double timeout_s = 300;
  };

  // Collective over `bootstrap`: rank 0 makes the NCCL unique id, bootstrap
  // broadcasts it, every rank joins on `device` (made current here). Ranks
  // agree on the outcome over `bootstrap`, so either every rank gets a
  // communicator or every rank throws (naming the ranks that failed).
  static std::unique_ptr<NcclCommunicator> create(Communicator& bootstrap, int device);
  static std::unique_ptr<NcclCommunicator> create(Communicator& bootstrap, int device, Options options);

  ~NcclCommunicator();  // finalize + destroy, or nothing after abort; never throws
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  bool blocking() const { return options_.blocking; }
  bool aborted() const { return aborted_; }
  // The communication stream (high priority, non-blocking).
  const cuda::Stream& stream() const { return stream_; }
  ncclComm* handle() const { return comm_; }

  // In place over all ranks, on the communication stream after `ready` (may
  // be null). Types: F32, BF16, F16, F64 (and I32, I64 for Sum/Min/Max).
  // Average is NCCL's ncclAvg. Returns once the work is queued.
  void allreduce(void* buf, int64_t count, DType dtype, ReduceOp op, const cuda::Event* ready);
  // Rank `root`'s `count` elements into `buf` on every rank, in place. Any dtype.
  void broadcast(void* buf, int64_t count, DType dtype, int root, const cuda::Event* ready);
  // Records `e` on the communication stream: work queued so far is done when
  // `e` is (the compute stream waits with e.wait_on(compute)).
  void record_done(const cuda::Event& e) const;

  // Blocks until the communication stream's queued work has finished,
  // polling the stream and NCCL's asynchronous error state every ~1 ms. On an
  // NCCL error, a CUDA error or after `timeout_seconds` (<= 0: no limit) the
  // communicator is aborted and lockstep::Error says why.
  void wait(double timeout_seconds);
  // The same, but only until `e` (recorded on the communication stream by
  // record_done) has happened: lets the host wait for an earlier step's
  // collectives while this step's are still queued.
  void wait(const cuda::Event& e, double timeout_seconds);

  // ncclCommAbort: pending and future collectives fail instead of waiting for
  // peers. Idempotent; never throws. Every later call throws.
  void abort() noexcept;

 private:
  NcclCommunicator(int rank, int size, int device, Options options, int stream_priority);
  // Polls ncclCommGetAsyncError until the state leaves ncclInProgress (the
  // call is enqueued); aborts and throws on an error or after the timeout.
  void wait_enqueued(const char* what);
  // wait()'s loop; `event` null: the whole communication stream.
  void wait_for(cudaEvent_t event, double timeout_seconds);
  void check_usable(const char* what) const;
  [[noreturn]] void fail_and_abort(const std::string& message, const char* file, int line);

  int rank_ = 0, size_ = 1, device_ = 0;
  Options options_;
  cuda::Stream stream_;
  ncclComm* comm_ = nullptr;
  bool aborted_ = false;
  std::string last_op_ = "collective";  // the last queued call ("allreduce"), for messages
  std::string last_detail_;             // its arguments ("sum of 1000 F32 elements")
  int64_t queued_since_wait_ = 0;       // calls queued since the last wait()
};

}  // namespace lockstep
