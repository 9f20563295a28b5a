// Launch geometry shared by the GPU kernels (.cu files only): the block size,
// the grid cap for grid-stride loops, the loop's index helpers, and the
// block's tree sum.
#pragma once

#include <algorithm>
#include <cstdint>

namespace lockstep::cuda {

constexpr int kThreads = 256;          // threads per block; a power of two (tree reductions halve it)
constexpr int64_t kMaxBlocks = 4096;   // grid cap: grid-stride loops cover the rest
static_assert((kThreads & (kThreads - 1)) == 0, "kThreads must be a power of two");

// Blocks for n elements, one per thread, capped at kMaxBlocks.
inline int blocks_for(int64_t n) {
  return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

__device__ inline int64_t first_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_stride() { return static_cast<int64_t>(blockDim.x) * gridDim.x; }

// i % n along a thread's grid-stride loop (i = first_index(), += grid_stride()),
// kept by one addition and compare per step: a 64-bit division per element
// costs more than a 2-byte element's memory traffic. `value` is i % n.
struct StrideMod {
  int64_t n, step, value;
  __device__ StrideMod(int64_t n_) : n(n_), step(grid_stride() % n_), value(first_index() % n_) {}
  __device__ void advance() {
    value += step;
    if (value >= n) value -= n;
  }
};

// Tree sum over one value per thread in shared memory `s` [kThreads], filled
// and then __syncthreads()'d by the caller; all kThreads threads must call it.
// The sum is in s[0] on return (visible to every thread). A fixed order: the
// same inputs give the same sum on every run and every GPU.
template <typename T>
__device__ void block_sum(T* s) {
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (static_cast<int>(threadIdx.x) < half) s[threadIdx.x] += s[threadIdx.x + half];
    __syncthreads();
  }
}

}  // namespace lockstep::cuda
