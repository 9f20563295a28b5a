// CudaGraph: stream capture, instantiation and replay.
#include "cuda/graph.h"

#include <utility>

#include "core/error.h"

namespace lockstep::cuda {

CudaGraph::~CudaGraph() { reset(); }

CudaGraph::CudaGraph(CudaGraph&& o) noexcept
    : graph_(std::exchange(o.graph_, nullptr)), exec_(std::exchange(o.exec_, nullptr)) {}

CudaGraph& CudaGraph::operator=(CudaGraph&& o) noexcept {
  if (this != &o) {
    reset();
    graph_ = std::exchange(o.graph_, nullptr);
    exec_ = std::exchange(o.exec_, nullptr);
  }
  return *this;
}

void CudaGraph::reset() noexcept {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
  exec_ = nullptr;
  graph_ = nullptr;
}

CudaGraph CudaGraph::capture(const Stream& stream, const std::function<void()>& queue) {
  LS_CUDA_CHECK(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeRelaxed));
  CudaGraph g;
  try {
    queue();
  } catch (...) {
    cudaGraph_t partial = nullptr;
    (void)cudaStreamEndCapture(stream.get(), &partial);  // ends the capture; the partial graph is discarded
    if (partial) cudaGraphDestroy(partial);
    (void)cudaGetLastError();
    throw;
  }
  LS_CUDA_CHECK(cudaStreamEndCapture(stream.get(), &g.graph_));
  LS_CHECK(g.graph_ != nullptr, "CUDA graph capture returned no graph");
  LS_CUDA_CHECK(cudaGraphInstantiate(&g.exec_, g.graph_, 0));
  return g;
}

void CudaGraph::launch(const Stream& stream) const {
  LS_CHECK(exec_ != nullptr, "launch of an empty CUDA graph");
  LS_CUDA_CHECK(cudaGraphLaunch(exec_, stream.get()));
}

size_t CudaGraph::nodes() const {
  size_t n = 0;
  if (graph_) LS_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &n));
  return n;
}

}  // namespace lockstep::cuda
