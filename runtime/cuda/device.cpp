// Device discovery and per-rank selection.
#include "cuda/device.h"

#include <cuda_runtime_api.h>

#include "core/error.h"
#include "cuda/check.h"

namespace lockstep::cuda {
namespace {

// cudaGetDeviceCount reports "no driver" and "no device" as errors; both mean 0.
int count_or_error(cudaError_t* error) {
  int n = 0;
  *error = cudaGetDeviceCount(&n);
  if (*error != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error so later calls are clean
    return 0;
  }
  return n;
}

}  // namespace

std::string DeviceInfo::str() const {
  return fmt::format("{} (sm_{}{}, {} SMs, {:.1f} GiB)", name, major, minor, multiprocessors,
                     static_cast<double>(total_bytes) / (1 << 30));
}

int device_count() {
  cudaError_t e;
  return count_or_error(&e);
}

std::string unavailable_reason() {
  cudaError_t e;
  const int n = count_or_error(&e);
  if (n > 0) return "";
  if (e == cudaSuccess) return "no CUDA device is visible";
  if (e == cudaErrorInsufficientDriver) return "no usable CUDA driver on this machine (cudaErrorInsufficientDriver)";
  return fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
}

DeviceInfo device_info(int index) {
  cudaDeviceProp p{};
  LS_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
  DeviceInfo d;
  d.index = index;
  d.name = p.name;
  d.major = p.major;
  d.minor = p.minor;
  d.multiprocessors = p.multiProcessorCount;
  d.total_bytes = static_cast<int64_t>(p.totalGlobalMem);
  return d;
}

int select_device(int local_rank, int local_size, bool exclusive, const std::string& what) {
  const int n = device_count();
  LS_CHECK_INPUT_ON(n > 0, what, ": {}", unavailable_reason());
  LS_CHECK_INPUT_ON(!exclusive || local_size <= n, what,
                    ": {} ranks on this host but {} GPU{}; NCCL needs one GPU per rank (ranks share a GPU when "
                    "gradients are staged through MPI)",
                    local_size, n, n == 1 ? "" : "s");
  const int index = local_rank % n;
  LS_CUDA_CHECK(cudaSetDevice(index));
  return index;
}

DeviceGuard::DeviceGuard(int index) {
  LS_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != index) LS_CUDA_CHECK(cudaSetDevice(index));
}

DeviceGuard::~DeviceGuard() { cudaSetDevice(previous_); }

}  // namespace lockstep::cuda
