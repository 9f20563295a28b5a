// --device cuda: the build must have the CUDA parts and the machine a GPU.
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

}  // namespace lockstep
