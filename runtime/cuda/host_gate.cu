// HostGate (cuda/host_gate.h): the waiting kernel and its page-locked flags.
#include "cuda/host_gate.h"

#include <cstdint>

#include "cuda/check.h"

namespace lockstep::cuda {
namespace {

__device__ inline uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins (sleeping between reads of host memory) until flags[0] is set or
// `timeout_ns` have passed; then flags[1] says which.
__global__ void wait_for_host(volatile int* flags, uint64_t timeout_ns) {
  const uint64_t start = global_ns();
  while (flags[0] == 0) {
    if (global_ns() - start > timeout_ns) {
      flags[1] = 1;
      return;
    }
#if __CUDA_ARCH__ >= 700
    __nanosleep(1000);  // fewer reads across PCIe while waiting
#endif
  }
}

}  // namespace

HostGate::HostGate() {
  void* p = nullptr;
  LS_CUDA_CHECK(cudaHostAlloc(&p, 2 * sizeof(int), cudaHostAllocMapped));
  host_ = static_cast<int*>(p);
  host_[0] = host_[1] = 0;
  // With unified addressing (every 64-bit process) page-locked memory is
  // mapped at its host address; the runtime's own answer is preferred.
  void* d = nullptr;
  if (cudaHostGetDevicePointer(&d, p, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    d = p;
  }
  device_ = static_cast<int*>(d);
}

HostGate::~HostGate() {
  // Open, and let the kernel leave, before its flags are freed: a run that
  // threw between close() and open() leaves the gate closed.
  if (host_) open();
  if (passed_) {
    cudaEventSynchronize(passed_);
    cudaEventDestroy(passed_);
  }
  if (host_) cudaFreeHost(host_);
}

void HostGate::close(cudaStream_t stream, double timeout_ms) {
  __atomic_store_n(&host_[0], 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&host_[1], 0, __ATOMIC_SEQ_CST);
  wait_for_host<<<1, 1, 0, stream>>>(device_, static_cast<uint64_t>(timeout_ms * 1e6));
  LS_CUDA_CHECK(cudaGetLastError());
  if (!passed_) LS_CUDA_CHECK(cudaEventCreateWithFlags(&passed_, cudaEventDisableTiming));
  LS_CUDA_CHECK(cudaEventRecord(passed_, stream));
}

void HostGate::open() { __atomic_store_n(&host_[0], 1, __ATOMIC_SEQ_CST); }

bool HostGate::timed_out() const { return __atomic_load_n(&host_[1], __ATOMIC_SEQ_CST) != 0; }

}  // namespace lockstep::cuda
