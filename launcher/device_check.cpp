// --device cuda's check and the choices of --device auto and --layout auto (device_check.h).
#include "device_check.h"

#include "core/error.h"
#ifdef LOCKSTEP_HAVE_CUDA
#include "cuda/device.h"
#endif

namespace lockstep {

void check_cuda_device_usable() {
#ifdef LOCKSTEP_HAVE_CUDA
  const int n = cuda::device_count();
  LS_CHECK_INPUT(n > 0, "--device cuda: {}", cuda::unavailable_reason());
#else
  LS_INPUT_ERROR("--device cuda: this build has no CUDA support (configured with LOCKSTEP_CUDA=OFF or without "
                 "nvcc/cuDNN/NCCL)");
#endif
}

AutoDevice choose_auto_device() {
#ifdef LOCKSTEP_HAVE_CUDA
  const int n = cuda::device_count();
  if (n > 0) return {DeviceKind::Cuda, fmt::format("{} GPU{} visible", n, n == 1 ? "" : "s")};
  return {DeviceKind::Cpu, cuda::unavailable_reason()};
#else
  return {DeviceKind::Cpu, "this build has no CUDA support"};
#endif
}

AutoLayout choose_auto_layout(DeviceKind device, Precision precision) {
  if (device != DeviceKind::Cuda) return {LayoutChoice::Nchw, "the CPU"};
  if (precision == Precision::F32) return {LayoutChoice::Nchw, "fp32 on the GPU"};
  return {LayoutChoice::Nhwc,
          fmt::format("{} on the GPU: tensor-core convolutions read and write channels-last", name(precision))};
}

}  // namespace lockstep
