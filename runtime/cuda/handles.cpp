// cuBLAS and cuDNN handle lifetimes.
#include "cuda/handles.h"

#include "cuda/check.h"

namespace lockstep::cuda {

CublasHandle::CublasHandle(cudaStream_t stream) {
  LS_CUBLAS_CHECK(cublasCreate(&handle_));
  LS_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  // fp32 GEMMs stay fp32 (no TF32) unless a precision mode asks otherwise:
  // parity with the CPU path is the default.
  LS_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
}

CublasHandle::~CublasHandle() {
  if (handle_) cublasDestroy(handle_);
}

CudnnHandle::CudnnHandle(cudaStream_t stream) {
  LS_CUDNN_CHECK(cudnnCreate(&handle_));
  LS_CUDNN_CHECK(cudnnSetStream(handle_, stream));
}

CudnnHandle::~CudnnHandle() {
  if (handle_) cudnnDestroy(handle_);
}

}  // namespace lockstep::cuda
