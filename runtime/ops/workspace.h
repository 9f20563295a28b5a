// Workspace: scratch memory an op reuses across calls, one buffer per thread
// (ops split a batch over threads and each thread needs its own im2col space).
// Buffers grow, never shrink, and always hold at least one float (an
// undefined tensor's numel() is 1, the empty product: it must not pass for a
// buffer). Reserve before a parallel region: allocation can throw, and
// exceptions must not leave an OpenMP region.
#pragma once

#include <algorithm>
#include <vector>

#include "tensor/tensor.h"

namespace lockstep::ops {

class Workspace {
 public:
  // Ensures `threads` buffers of at least `numel` floats each.
  void reserve(int threads, int64_t numel) {
    if (static_cast<int>(bufs_.size()) < threads) bufs_.resize(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t)
      if (!bufs_[static_cast<size_t>(t)].defined() || bufs_[static_cast<size_t>(t)].numel() < numel)
        bufs_[static_cast<size_t>(t)] = Tensor::zeros(Shape{std::max<int64_t>(numel, 1)});
  }
  float* floats(int thread) { return bufs_[static_cast<size_t>(thread)].data<float>(); }
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

 private:
  std::vector<Tensor> bufs_;
  Tensor shared_;
};

}  // namespace lockstep::ops
