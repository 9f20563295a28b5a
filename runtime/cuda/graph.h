// CudaGraph: work captured from a stream into a CUDA graph and instantiated,
// so it can be replayed with one launch (RAII: the graph and its executable
// are destroyed with the object; move-only).
//
// Capture runs in relaxed mode: host-side calls that are not stream work
// (cuDNN's descriptor setup, NCCL's polling, event queries of earlier work)
// stay legal while the stream records. Everything the captured work touches
// must stay where it is for as long as the graph is replayed: the caller
// captures only once its buffers have stopped growing, and captures again
// after anything that may move them.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

#include "cuda/stream.h"

namespace lockstep::cuda {

class CudaGraph {
 public:
  CudaGraph() = default;
  ~CudaGraph();
  CudaGraph(CudaGraph&& o) noexcept;
  CudaGraph& operator=(CudaGraph&& o) noexcept;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Records what `queue` enqueues on `stream` (other streams join through
  // events and must be joined back before it returns) and instantiates it.
  // Nothing runs: launch() runs it. If `queue` throws, the capture is ended
  // and discarded and the exception passes on.
  static CudaGraph capture(const Stream& stream, const std::function<void()>& queue);
  // Queues one replay on `stream`.
  void launch(const Stream& stream) const;
  bool valid() const { return exec_ != nullptr; }
  size_t nodes() const;  // kernels, copies, memsets, event nodes, ... in the graph

 private:
  void reset() noexcept;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace lockstep::cuda
