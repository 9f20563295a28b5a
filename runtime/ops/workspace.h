// Workspace: scratch memory an op reuses across calls; grows, never shrinks.
#pragma once

#include "tensor/tensor.h"

namespace lockstep::ops {

class Workspace {
 public:
  float* floats(int64_t numel) {
    if (buf_.numel() < numel) buf_ = Tensor::zeros(Shape{numel});
    return buf_.data<float>();
  }
  int64_t capacity() const { return buf_.numel(); }

 private:
  Tensor buf_;
};

}  // namespace lockstep::ops
