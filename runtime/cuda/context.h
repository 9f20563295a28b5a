// Everything one rank's GPU work runs on: the device, the compute stream, the
// caching allocator ordered on that stream, cuBLAS (opened here, not at program
// start: cuda/cublas_library.h), the cuBLAS and cuDNN handles bound to the
// stream, and a growable scratch workspace for library calls. One per rank,
// owned by whoever drives training (the trainer, a test); layers get a pointer
// through their Forward/BackwardContext. Not a singleton.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "cuda/caching_allocator.h"
#include "cuda/handles.h"
#include "cuda/stream.h"

namespace lockstep::cuda {

// How convolutions pick their cuDNN algorithms (ops/conv/conv2d_cuda.h): from
// cuDNN's heuristics (cheap, the same on every run), or by timing the
// candidates once per layer shape and batch size (cudnnFind*, PyTorch's
// cudnn.benchmark): faster steps, but the choice may differ between runs.
enum class ConvSearch { Heuristic, Benchmark };

// What a convolution may choose. `deterministic`: only algorithms cuDNN marks
// CUDNN_DETERMINISTIC, unless none fits (off: any, as PyTorch by default,
// whose backward algorithms may sum with atomics and so vary in the last
// bits from run to run). `workspace_limit`: the most scratch one cuDNN call
// may use (some fast algorithms, FFT above all, need gigabytes).
struct ConvPolicy {
  static constexpr size_t kDefaultWorkspaceLimit = size_t{512} << 20;
  ConvSearch search = ConvSearch::Heuristic;
  bool deterministic = true;
  size_t workspace_limit = kDefaultWorkspaceLimit;
};

// Where a convolution sends one line per timed race between cuDNN's legacy
// algorithm and its graph-API plans (ConvSearch::Benchmark): what ran, how
// fast, what was left out and what was kept. The trainer logs it at debug level.
using ConvReport = std::function<void(const std::string&)>;

class Context {
 public:
  explicit Context(int device);  // makes `device` current
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const { return device_; }
  const Stream& stream() const { return stream_; }
  cudaStream_t raw_stream() const { return stream_.get(); }
  const std::shared_ptr<CachingAllocator>& allocator() const { return allocator_; }
  // cuBLAS calls go through the opened library: ctx.blas().sgemm(ctx.cublas(), ...).
  const CublasLibrary& blas() const { return cublas_library_; }
  cublasHandle_t cublas() const { return cublas_.get(); }
  cudnnHandle_t cudnn() const { return cudnn_.get(); }

  // At least `bytes` of device scratch, valid until the next call (stream ordered:
  // growing it frees the old block, whose last use was on this stream).
  void* workspace(size_t bytes);
  size_t workspace_bytes() const { return workspace_bytes_; }
  // Shrinks the scratch to `bytes` when it is larger (0: none), stream ordered
  // as growing is; the old block goes back to the allocator's cache. For
  // scratch grown for a one-off call (a convolution race's largest contender)
  // that every later step would otherwise hold.
  void trim_workspace(size_t bytes);

  void synchronize() const { stream_.synchronize(); }

  // Read by each convolution when it first sees a batch size (its choice is
  // then kept for that size); set it before the first step.
  const ConvPolicy& conv_policy() const { return conv_policy_; }
  void set_conv_policy(const ConvPolicy& p) { conv_policy_ = p; }
  const ConvReport& conv_report() const { return conv_report_; }  // may be empty
  void set_conv_report(ConvReport r) { conv_report_ = std::move(r); }

 private:
  int device_;
  Stream stream_;
  std::shared_ptr<CachingAllocator> allocator_;
  CublasLibrary cublas_library_;  // before cublas_, which it outlives
  CublasHandle cublas_;
  CudnnHandle cudnn_;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  ConvPolicy conv_policy_;
  ConvReport conv_report_;
};

}  // namespace lockstep::cuda
