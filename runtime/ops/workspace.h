// Workspace: scratch memory an op reuses across calls, one buffer per thread
// (ops split a batch over threads and each thread needs its own im2col space),
// plus one buffer all threads read (`shared`).
// Buffers grow, never shrink, and always hold at least one float (an
// undefined tensor's numel() is 1, the empty product: it must not pass for a
// buffer). Reserve before a parallel region: allocation can throw, and
// exceptions must not leave an OpenMP region.
//
// The per-thread buffers hold nothing from one call to the next, so workspaces
// whose calls never overlap (the layers of one model, which run one at a time)
// may share them: share_thread_buffers. `shared` stays each workspace's own
// (Winograd keeps its filter transform there from a forward to its backward).
// A buffer may move when any sharer grows it: take pointers after reserve(),
// never keep them across calls.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "tensor/tensor.h"

namespace lockstep::ops {

class Workspace {
 public:
  // Ensures `threads` buffers of at least `numel` floats each.
  void reserve(int threads, int64_t numel) {
    std::vector<Tensor>& bufs = *threads_;
    if (static_cast<int>(bufs.size()) < threads) bufs.resize(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t)
      if (!bufs[static_cast<size_t>(t)].defined() || bufs[static_cast<size_t>(t)].numel() < numel)
        bufs[static_cast<size_t>(t)] = Tensor::zeros(Shape{std::max<int64_t>(numel, 1)});
  }
  float* floats(int thread) { return (*threads_)[static_cast<size_t>(thread)].data<float>(); }
  // One buffer all threads read (filled before the parallel region).
  float* shared(int64_t numel) {
    if (!shared_.defined() || shared_.numel() < numel) shared_ = Tensor::zeros(Shape{std::max<int64_t>(numel, 1)});
    return shared_.data<float>();
  }
  // Single-threaded convenience: reserve and return buffer 0.
  float* floats(int64_t numel) {
    reserve(1, numel);
    return floats(0);
  }
  // From now on this workspace uses `other`'s per-thread buffers (and they
  // both grow them); its own are released.
  void share_thread_buffers(const Workspace& other) { threads_ = other.threads_; }
  // Bytes held: the per-thread buffers (shared with every sharer) and `shared`.
  int64_t thread_bytes() const {
    int64_t b = 0;
    for (const Tensor& t : *threads_) b += static_cast<int64_t>(t.nbytes());
    return b;
  }
  int64_t shared_bytes() const { return static_cast<int64_t>(shared_.nbytes()); }
  // Sets every element of the per-thread buffers (tests: NaN there shows a
  // call that reads what an earlier call left).
  void fill_thread_buffers(float value) {
    for (Tensor& t : *threads_)
      if (t.defined()) t.fill(value);
  }

 private:
  std::shared_ptr<std::vector<Tensor>> threads_ = std::make_shared<std::vector<Tensor>>();
  Tensor shared_;
};

}  // namespace lockstep::ops
