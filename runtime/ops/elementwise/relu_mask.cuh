// The fused ReLU's backward mask, shared by the layers that apply a ReLU in
// their own epilogue (Linear, Conv2d; .cu files only): dy = y > 0 ? dy : 0 in
// place, writing only the zeros. T: fp32, bf16 or fp16 storage (cuda/float16.cuh).
#pragma once

#include <cstdint>

#include "cuda/float16.cuh"
#include "cuda/check.h"
#include "cuda/launch.cuh"

namespace lockstep::ops {

template <typename T>
__global__ void relu_mask_kernel(int64_t n, const T* y, T* dy) {
  for (int64_t i = cuda::first_index(); i < n; i += cuda::grid_stride())
    if (!(cuda::load(y, i) > 0.f)) cuda::store(dy, i, 0.f);
}

// y, dy [n]; queued on `stream`.
template <typename T>
void relu_mask_cuda(int64_t n, const T* y, T* dy, cudaStream_t stream) {
  if (n <= 0) return;
  relu_mask_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(n, y, dy);
  LS_CUDA_CHECK_LAUNCH();
}

}  // namespace lockstep::ops
