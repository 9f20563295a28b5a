// Which CUDA devices this process can see, and which one a rank uses.
// Device selection follows the local rank: rank r on a host takes GPU
// r % count, so ranks never all pile onto GPU 0. With NCCL each rank needs a
// GPU of its own (NCCL refuses two ranks on one device); staging through MPI
// (--comm mpi) lets several ranks share one.
#pragma once

#include <cstdint>
#include <string>

namespace lockstep::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  int64_t total_bytes = 0;
  std::string str() const;  // "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)"
};

// Number of usable devices; 0 when there is no device or no driver (never throws).
int device_count();
// Why device_count() is 0, in words ("no CUDA driver (libcuda.so not found)",
// "CUDA error 100 (cudaErrorNoDevice: no CUDA-capable device is detected)").
// Empty when there are devices.
std::string unavailable_reason();

DeviceInfo device_info(int index);

// Picks and makes current the device for a rank: local_rank % device_count().
// Throws InputError with subject `what` (the input that asked for a GPU, in
// the caller's words) when there is no device, and when `exclusive` (NCCL)
// and more local ranks than devices.
int select_device(int local_rank, int local_size, bool exclusive, const std::string& what);

// Makes `index` current for the lifetime of the guard, restoring the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace lockstep::cuda
