// NCHW <-> NHWC transposes on the GPU: per item a [rows, cols] -> [cols, rows]
// matrix transpose (nchw -> nhwc: rows = c, cols = hw; back: rows = hw,
// cols = c) through a 32x32 shared-memory tile, so both the loads (along a src
// row) and the stores (along a dst row) are coalesced. Grid: x = the tiles of
// one item, y = items (a grid-stride loop past 65535 items); blocks of 32 x 8
// threads, each moving 4 elements of the tile. Elements are moved as raw 4- or
// 2-byte words (uint32_t / uint16_t), never as floats: a pure copy of the bits,
// so the result is bitwise the CPU transpose's (NaN payloads included).
#include "ops/layout/layout_cuda.h"

#include <algorithm>
#include <climits>
#include <string>

#include "core/throw.h"
#include "cuda/check.h"

namespace lockstep::ops {
namespace {

constexpr int kTile = 32;
constexpr int kRowsPerPass = 8;  // blockDim.y: each thread moves kTile / kRowsPerPass elements
constexpr int64_t kMaxGridY = 65535;

// dst[b][j][i] = src[b][i][j] for src [n, rows, cols].
template <typename W>
__global__ void transpose_kernel(int64_t n, int64_t rows, int64_t cols, int64_t col_tiles, const W* src, W* dst) {
  __shared__ W tile[kTile][kTile + 1];  // +1: column reads hit distinct banks
  const int64_t t = blockIdx.x;
  const int64_t r0 = t / col_tiles * kTile, c0 = t % col_tiles * kTile;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t item = rows * cols;
  for (int64_t b = blockIdx.y; b < n; b += gridDim.y) {
    const W* s = src + b * item;
    W* d = dst + b * item;
    for (int i = ty; i < kTile; i += kRowsPerPass) {
      const int64_t r = r0 + i, c = c0 + tx;
      if (r < rows && c < cols) tile[i][tx] = s[r * cols + c];
    }
    __syncthreads();
    for (int i = ty; i < kTile; i += kRowsPerPass) {
      const int64_t c = c0 + i, r = r0 + tx;  // dst row c, column r
      if (c < cols && r < rows) d[c * rows + r] = tile[tx][i];
    }
    __syncthreads();  // the tile is refilled for the next item
  }
}

// 4- or 2-byte words for dt; anything else throws.
int word_size(DType dt, const char* op) {
  LS_REQUIRE(dt == DType::F32 || dt == DType::BF16 || dt == DType::F16,
             std::string(op) + " (cuda): " + std::string(dtype_name(dt)) + " data (F32, BF16 or F16 only)");
  return dt == DType::F32 ? 4 : 2;
}

template <typename W>
void launch(int64_t n, int64_t rows, int64_t cols, const void* src, void* dst, cudaStream_t stream, const char* op) {
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  LS_REQUIRE(row_tiles <= INT_MAX / col_tiles, std::string(op) + " (cuda): too many tiles per item");
  const dim3 grid(static_cast<unsigned>(row_tiles * col_tiles), static_cast<unsigned>(std::min(n, kMaxGridY)));
  const dim3 block(kTile, kRowsPerPass);
  transpose_kernel<W><<<grid, block, 0, stream>>>(n, rows, cols, col_tiles, static_cast<const W*>(src),
                                                   static_cast<W*>(dst));
  LS_CUDA_CHECK_LAUNCH();
}

void transpose(DType dt, int64_t n, int64_t rows, int64_t cols, const void* src, void* dst, cudaStream_t stream,
               const char* op) {
  const int size = word_size(dt, op);  // dt first: a wrong type throws even when there is nothing to do
  LS_REQUIRE(n >= 0 && rows >= 0 && cols >= 0, std::string(op) + " (cuda): negative size");
  if (n == 0 || rows == 0 || cols == 0) return;
  if (rows == 1 || cols == 1) {  // [n, 1, k] and [n, k, 1] are the same bytes: one copy, not 32-element tiles
    if (src != dst)
      LS_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n * rows * cols) * static_cast<size_t>(size),
                                    cudaMemcpyDeviceToDevice, stream));
    return;
  }
  if (size == 4)
    launch<uint32_t>(n, rows, cols, src, dst, stream, op);
  else
    launch<uint16_t>(n, rows, cols, src, dst, stream, op);
}

}  // namespace

void nchw_to_nhwc_cuda(DType dt, int64_t n, int64_t c, int64_t hw, const void* src, void* dst, cudaStream_t stream) {
  transpose(dt, n, c, hw, src, dst, stream, "nchw_to_nhwc");
}

void nhwc_to_nchw_cuda(DType dt, int64_t n, int64_t c, int64_t hw, const void* src, void* dst, cudaStream_t stream) {
  transpose(dt, n, hw, c, src, dst, stream, "nhwc_to_nchw");
}

}  // namespace lockstep::ops
