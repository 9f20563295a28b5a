// --device cuda: the build must have the CUDA parts and the machine a GPU;
// the trainer's training loop itself is not on the GPU yet (the GPU ops, the
// caching allocator and NCCL are in liblockstep), so it stops either way.
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
  LS_INPUT_ERROR("--device cuda: {} GPU{} found, but the trainer's training loop does not run on the GPU yet "
                 "(GPU ops and NCCL are in liblockstep; see docs/gpu.md)", n, n == 1 ? "" : "s");
#else
  LS_INPUT_ERROR("--device cuda: this build has no CUDA support (configured with LOCKSTEP_CUDA=OFF or without "
                 "nvcc/cuDNN/NCCL)");
#endif
}

}  // namespace lockstep
