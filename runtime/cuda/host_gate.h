// HostGate: holds a stream at a kernel until the host opens it, so that
// events around the work queued behind it time the GPU alone.
//
// Timing a few calls between two events on an idle GPU measures the host's
// cost of launching them whenever that is larger than the GPU's time (small
// convolutions: tens of microseconds each way). With the gate closed first,
// the calls are all queued while the GPU waits, then run back to back when
// the host opens it (nvbench's "blocking kernel"). The kernel gives up at a
// timeout on the device's clock, so a call that waits for the stream (a
// synchronous copy) cannot hang: the gate then reports timed_out() and the
// timing includes the host's cost, as without a gate.
//
// Sequence: close(stream) -> record start, queue the work, record end ->
// open() -> wait for the end event -> timed_out(). close() again only after
// the stream has passed the previous gate (the flags are reused). The
// destructor opens the gate and waits for the stream to pass it, so an
// exception between close() and open() leaves no kernel reading freed flags.
#pragma once

#include <cuda_runtime_api.h>

namespace lockstep::cuda {

class HostGate {
 public:
  HostGate();  // two page-locked flags mapped into the device's address space
  ~HostGate();
  HostGate(const HostGate&) = delete;
  HostGate& operator=(const HostGate&) = delete;

  // Queues the waiting kernel (one thread) on `stream`.
  void close(cudaStream_t stream, double timeout_ms);
  void open();
  // Once the stream has passed the gate: whether the kernel stopped at the timeout.
  bool timed_out() const;

 private:
  int* host_ = nullptr;    // [0]: open, [1]: timed out
  int* device_ = nullptr;  // the same flags, as the kernel sees them
  cudaEvent_t passed_ = nullptr;  // recorded behind the last kernel: the destructor waits for it
};

}  // namespace lockstep::cuda
