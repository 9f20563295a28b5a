// cuBLAS and cuDNN handle lifetimes.
#include "cuda/handles.h"

#include "cuda/check.h"

namespace lockstep::cuda {

CublasHandle::CublasHandle(const CublasLibrary& library, cudaStream_t stream) : library_(&library) {
  LS_CUBLAS_CHECK(library.create(&handle_));
  LS_CUBLAS_CHECK(library.set_stream(handle_, stream));
  // fp32 GEMMs stay fp32 (no TF32) unless a precision mode asks otherwise:
  // parity with the CPU path is the default.
  LS_CUBLAS_CHECK(library.set_math_mode(handle_, CUBLAS_DEFAULT_MATH));
}

CublasHandle::~CublasHandle() {
  if (handle_) library_->destroy(handle_);
}

CudnnHandle::CudnnHandle(cudaStream_t stream) {
  LS_CUDNN_CHECK(cudnnCreate(&handle_));
  LS_CUDNN_CHECK(cudnnSetStream(handle_, stream));
}

CudnnHandle::~CudnnHandle() {
  if (handle_) cudnnDestroy(handle_);
}

}  // namespace lockstep::cuda
