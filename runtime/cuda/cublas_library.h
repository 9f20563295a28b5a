// cuBLAS, opened when a GPU context is made instead of when the program starts.
//
// Linked the usual way, libcublas (with libcublasLt, which it needs) is loaded
// and initialised before main: 0.11 s and 210 MB of resident memory in every
// process (a program that only links it, measured 2026-11-23, CUDA 13.0), so
// every CPU run of a CUDA-enabled build paid for a library only the GPU path
// calls. CublasLibrary dlopens it and resolves the entry points lockstep uses
// into typed pointers. Their types are cublas_v2.h's own declarations
// (decltype), so a changed signature is a compile error, not a bad call.
//
// Owned by cuda::Context (one per rank, no global state). The library stays
// mapped after the last owner goes (RTLD_NODELETE): cuBLAS keeps per-process
// state that must outlive its handles, and a second context reopens it for free.
#pragma once

#include <cublas_v2.h>

#include <string>

namespace lockstep::cuda {

class CublasLibrary {
 public:
  // libcublas.so.<major> of the toolkit this was built with.
  static std::string default_soname();

  // Opens `soname` through the usual search (the caller's RUNPATH,
  // LD_LIBRARY_PATH, ld.so.cache), then in the directory the build found
  // cuBLAS in. Throws lockstep::Error naming the library (and dlerror's
  // reason) if it cannot be opened or lacks an entry point.
  explicit CublasLibrary(const std::string& soname = default_soname());
  ~CublasLibrary();
  CublasLibrary(const CublasLibrary&) = delete;
  CublasLibrary& operator=(const CublasLibrary&) = delete;

  // The path dlopen reported for the opened library.
  const std::string& path() const { return path_; }

  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  // cublas_api.h overloads cublasGemmEx for C++ (an inline wrapper taking the
  // old cudaDataType compute type); the cast picks the exported one and
  // fails to compile if its signature changes.
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                    const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                    const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  decltype(static_cast<GemmEx>(&cublasGemmEx)) gemm_ex = nullptr;

 private:
  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace lockstep::cuda
