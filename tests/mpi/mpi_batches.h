// The MPI tests' inputs: a lenet-shaped batch of `n` samples whose content
// depends on `key` alone (the same key gives the same data on any rank), and
// a rank's contribution to a reduction.
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

// This rank's values: deterministic, different on every rank.
inline Tensor contribution(int64_t n, int rank, uint64_t key) {
  Tensor t = Tensor::zeros(Shape{n});
  Rng rng(rng_key(key, static_cast<uint64_t>(rank)));
  for (float& v : t.span<float>()) v = rng.normal();
  return t;
}

}  // namespace lockstep::testing
