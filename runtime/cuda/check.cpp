// Error text for the four GPU libraries' status codes.
#include "cuda/check.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>

#include "core/error.h"

namespace lockstep::cuda {
namespace {

// cuBLAS's own cublasGetStatusName would need the library loaded; cuBLAS is
// opened only with a GPU context (cuda/cublas_library.h), and an error may
// come before that.
const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

}  // namespace

void fail(Library library, int status, const char* expr, const char* file, int line) {
  std::string what;
  switch (library) {
    case Library::Cuda: {
      const auto e = static_cast<cudaError_t>(status);
      what = fmt::format("CUDA error {} ({}: {})", status, cudaGetErrorName(e), cudaGetErrorString(e));
      break;
    }
    case Library::Cublas:
      what = fmt::format("cuBLAS error {} ({})", status, cublas_status_name(static_cast<cublasStatus_t>(status)));
      break;
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
