// Status checks for CUDA, cuBLAS, cuDNN and NCCL calls. Every call into those
// libraries goes through one of these macros; a failure throws lockstep::Error
// with the library's own error text, the failing expression and file:line.
// This header pulls in no CUDA headers (the status codes all use 0 for
// success), so .cu files and plain C++ can both include it.
#pragma once

namespace lockstep::cuda {

enum class Library { Cuda, Cublas, Cudnn, Nccl };

// Throws lockstep::Error: "<library> error <code> (<name>: <text>) in <expr>".
[[noreturn]] void fail(Library library, int status, const char* expr, const char* file, int line);

}  // namespace lockstep::cuda

#define LS_CUDA_STATUS_CHECK_(lib, expr)                                                       \
  do {                                                                                         \
    const int ls_status_ = static_cast<int>(expr);                                             \
    if (ls_status_ != 0) ::lockstep::cuda::fail(lib, ls_status_, #expr, __FILE__, __LINE__);   \
  } while (0)

#define LS_CUDA_CHECK(expr) LS_CUDA_STATUS_CHECK_(::lockstep::cuda::Library::Cuda, expr)
#define LS_CUBLAS_CHECK(expr) LS_CUDA_STATUS_CHECK_(::lockstep::cuda::Library::Cublas, expr)
#define LS_CUDNN_CHECK(expr) LS_CUDA_STATUS_CHECK_(::lockstep::cuda::Library::Cudnn, expr)
#define LS_NCCL_CHECK(expr) LS_CUDA_STATUS_CHECK_(::lockstep::cuda::Library::Nccl, expr)
// After a kernel launch: launch-configuration errors surface here, not later.
#define LS_CUDA_CHECK_LAUNCH() LS_CUDA_CHECK(cudaGetLastError())
