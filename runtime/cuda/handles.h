// RAII owners of the cuBLAS and cuDNN library handles. A handle is bound to
// one stream; all calls through it are queued there.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "cuda/cublas_library.h"

namespace lockstep::cuda {

class CublasHandle {
 public:
  // `library` must outlive the handle (cuda::Context owns both).
  CublasHandle(const CublasLibrary& library, cudaStream_t stream);
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  const CublasLibrary* library_;
  cublasHandle_t handle_ = nullptr;
};

class CudnnHandle {
 public:
  explicit CudnnHandle(cudaStream_t stream);
  ~CudnnHandle();
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
  cudnnHandle_t get() const { return handle_; }

 private:
  cudnnHandle_t handle_ = nullptr;
};

}  // namespace lockstep::cuda
