// Error text for the four GPU libraries' status codes.
#include "cuda/check.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>

#include "core/error.h"

namespace lockstep::cuda {

void fail(Library library, int status, const char* expr, const char* file, int line) {
  std::string what;
  switch (library) {
    case Library::Cuda: {
      const auto e = static_cast<cudaError_t>(status);
      what = fmt::format("CUDA error {} ({}: {})", status, cudaGetErrorName(e), cudaGetErrorString(e));
      break;
    }
    case Library::Cublas: {
      const auto e = static_cast<cublasStatus_t>(status);
      what = fmt::format("cuBLAS error {} ({}: {})", status, cublasGetStatusName(e), cublasGetStatusString(e));
      break;
    }
    case Library::Cudnn:
      what = fmt::format("cuDNN error {} ({})", status, cudnnGetErrorString(static_cast<cudnnStatus_t>(status)));
      break;
    case Library::Nccl:
      what = fmt::format("NCCL error {} ({})", status, ncclGetErrorString(static_cast<ncclResult_t>(status)));
      break;
  }
  throw_error(file, line, fmt::format("{} in {}", what, expr));
}

}  // namespace lockstep::cuda
