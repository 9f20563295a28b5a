// RAII wrappers for CUDA streams and events. Both are move-only and bound to
// the device that was current when they were made. Compute and communication
// are ordered with events (record on one stream, wait on the other), never by
// synchronising the host.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/check.h"

namespace lockstep::cuda {

class Stream {
 public:
  // A non-blocking stream (does not synchronise with the legacy default stream).
  // `priority`: lower numbers run first; 0 is the default priority.
  explicit Stream(int priority = 0) {
    LS_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priority));
  }
  ~Stream() {
    if (stream_) cudaStreamDestroy(stream_);
  }
  Stream(Stream&& o) noexcept : stream_(o.stream_) { o.stream_ = nullptr; }
  Stream& operator=(Stream&& o) noexcept {
    if (this != &o) {
      if (stream_) cudaStreamDestroy(stream_);
      stream_ = o.stream_;
      o.stream_ = nullptr;
    }
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  void synchronize() const { LS_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  // True when all work queued so far has finished (does not block).
  bool query() const {
    const cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaErrorNotReady) {
      (void)cudaGetLastError();  // not an error: clear it
      return false;
    }
    LS_CUDA_CHECK(e);
    return true;
  }

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  // Timing off by default: such events are cheaper to record and wait on.
  explicit Event(bool timing = false) {
    LS_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~Event() {
    if (event_) cudaEventDestroy(event_);
  }
  Event(Event&& o) noexcept : event_(o.event_) { o.event_ = nullptr; }
  Event& operator=(Event&& o) noexcept {
    if (this != &o) {
      if (event_) cudaEventDestroy(event_);
      event_ = o.event_;
      o.event_ = nullptr;
    }
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  void record(const Stream& s) const { LS_CUDA_CHECK(cudaEventRecord(event_, s.get())); }
  // Work queued on `s` after this call waits until the event has happened.
  void wait_on(const Stream& s) const { LS_CUDA_CHECK(cudaStreamWaitEvent(s.get(), event_, 0)); }
  void synchronize() const { LS_CUDA_CHECK(cudaEventSynchronize(event_)); }
  bool query() const {
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    LS_CUDA_CHECK(e);
    return true;
  }
  // Milliseconds between two timing events (both recorded and complete).
  static float elapsed_ms(const Event& start, const Event& end) {
    float ms = 0;
    LS_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, end.event_));
    return ms;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace lockstep::cuda
