// The legacy cuDNN convolution algorithm choice (ops/conv/conv2d_cuda.cu): which
// entry of a cudnnFind* (timed) or cudnnGet*_v7 (heuristic) list a layer
// takes, under the rules of cuda::ConvPolicy and the layer's precision.
#pragma once

#include <cudnn.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "cuda/check.h"

namespace lockstep::ops::legacy_choice {

inline bool tensor_op_math(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// What pick() accepts: tensor-op entries only when `tensor_ops` (16-bit);
// scratch at most `limit` bytes; with `deterministic`, a first pass over
// CUDNN_DETERMINISTIC entries only (cuda::ConvPolicy); Winograd and FFT
// entries only when `transforms`.
struct Rules {
  size_t limit = 0;
  bool tensor_ops = false;
  bool deterministic = true;
  bool transforms = true;
};

// The algorithms that transform their operands (Winograd, FFT). In 16-bit
// they round the transforms in the 16-bit type: a timed search on an H100
// (2026-11-24) took fp16 WINOGRAD_NONFUSED for a 5x5 forward, 1.06e-2 off the
// CPU (16 -> 32 channels, 12x12), where fp16 rounding alone is 2^-11.
inline bool transforms(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
inline bool transforms(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
inline bool transforms(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// The first usable entry of a list (ops/conv/conv2d_cuda.h): with rules.deterministic
// a first pass takes deterministic entries only and a second any, else one
// pass takes any. `workspace_size(algo, math, &bytes)` is the matching
// cudnnGet*WorkspaceSize call (16-bit: made with the entry's math type on the
// descriptor, as cuDNN returns algorithm and math type as a pair); its
// success also confirms that the algorithm supports this configuration.
template <typename Perf, typename WorkspaceSize>
bool pick(const std::vector<Perf>& perf, int returned, const Rules& rules, WorkspaceSize workspace_size,
          Perf& chosen, size_t& bytes) {
  for (int pass = rules.deterministic ? 0 : 1; pass < 2; ++pass)
    for (int i = 0; i < returned; ++i) {
      const Perf& p = perf[static_cast<size_t>(i)];
      if (p.status != CUDNN_STATUS_SUCCESS || (!rules.tensor_ops && tensor_op_math(p.mathType))) continue;
      if (!rules.transforms && transforms(p.algo)) continue;
      if (pass == 0 && p.determinism != CUDNN_DETERMINISTIC) continue;
      size_t need = 0;
      if (workspace_size(p.algo, p.mathType, &need) != CUDNN_STATUS_SUCCESS || need > rules.limit) continue;
      chosen = p;
      bytes = need;
      return true;
    }
  return false;
}

// One direction's algorithm: from the timed list when `timed` (cudnnFind*),
// else, or when the search fails or offers nothing pick() accepts (fell_back
// is then set), from the heuristic list. find/heuristic(requested, &returned,
// perf) are the matching cuDNN calls.
template <typename Perf, typename Find, typename Heuristic, typename WorkspaceSize>
bool choose_one(int max, bool timed, Find find, Heuristic heuristic, const Rules& rules,
                WorkspaceSize workspace_size, Perf& chosen, size_t& bytes, bool& fell_back) {
  std::vector<Perf> perf(static_cast<size_t>(std::max(max, 1)));
  const int requested = static_cast<int>(perf.size());
  int returned = 0;
  if (timed) {
    const cudnnStatus_t st = find(requested, &returned, perf.data());
    // A candidate whose scratch cudaMalloc failed is listed as failed, but the
    // runtime keeps cudaErrorMemoryAllocation as the last error: clear it, or
    // the next launch check would report it.
    (void)cudaGetLastError();
    if (st == CUDNN_STATUS_SUCCESS && pick(perf, returned, rules, workspace_size, chosen, bytes)) return true;
    fell_back = true;
  }
  LS_CUDNN_CHECK(heuristic(requested, &returned, perf.data()));
  return pick(perf, returned, rules, workspace_size, chosen, bytes);
}

}  // namespace lockstep::ops::legacy_choice
