// The MPI tests' input: a lenet-shaped batch of `n` samples whose content
// depends on `key` alone (the same key gives the same data on any rank).
#pragma once

#include "core/rng.h"
#include "tensor/tensor.h"

namespace lockstep::testing {

inline void make_batch(uint64_t key, int64_t n, Tensor& x, Tensor& y) {
  x = Tensor::zeros(Shape{n, 1, 28, 28});
  y = Tensor::zeros(Shape{n}, DType::I32);
  Rng rng(key);
  for (float& v : x.span<float>()) v = rng.normal();
  for (int64_t i = 0; i < n; ++i) y.data<int32_t>()[i] = static_cast<int32_t>(rng.below(10));
}

}  // namespace lockstep::testing
