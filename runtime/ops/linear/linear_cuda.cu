// Linear layer on the GPU: cuBLAS GEMMs (fp32, and bf16/fp16 in with fp32 accumulation) and
// three small kernels (bias + ReLU epilogue, ReLU mask, bias gradient).
//
// Row-major data through column-major cuBLAS. A row-major matrix M [r, c] with
// row stride c is, read column-major, the matrix M^T [c, r] with leading
// dimension c. So every product is computed transposed:
//   forward   y = x w^T        [B, out]
//     column-major: y^T [out, B] = w [out, in] * x^T [in, B]
//     w's buffer read column-major is w^T [in, out] (ld in): op T gives w.
//     x's buffer read column-major is x^T [in, B] (ld in): op N.
//     => gemm(T, N, m = out, n = B, k = in, A = w, lda = in, B = x, ldb = in, C = y, ldc = out)
//   weight gradient   dw = dy^T x   [out, in]
//     column-major: dw^T [in, out] = x^T [in, B] * dy [B, out]
//     x's buffer: x^T (ld in), op N; dy's buffer read column-major is dy^T [out, B]
//     (ld out): op T gives dy.
//     => gemm(N, T, m = in, n = out, k = B, A = x, lda = in, B = dy, ldb = out, C = dw, ldc = in)
//   input gradient   dx = dy w   [B, in]
//     column-major: dx^T [in, B] = w^T [in, out] * dy^T [out, B]
//     w's buffer: w^T (ld in), op N; dy's buffer: dy^T (ld out), op N.
//     => gemm(N, N, m = in, n = B, k = out, A = w, lda = in, B = dy, ldb = out, C = dx, ldc = in)
#include "ops/linear/linear_cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <string>

#include "core/throw.h"
#include "cuda/check.h"
#include "cuda/float16.cuh"
#include "cuda/launch.cuh"
#include "ops/elementwise/relu_mask.cuh"

namespace lockstep::ops {
namespace {

using cuda::kThreads;
using cuda::blocks_for;

int to_int(int64_t v, const char* what) {
  LS_REQUIRE(v >= 0 && v <= INT_MAX, std::string("linear (cuda): ") + what + " = " + std::to_string(v) +
                                         " is outside cuBLAS's int range");
  return static_cast<int>(v);
}

void check_sizes(int64_t B, int64_t in, int64_t out) {
  LS_REQUIRE(B >= 0 && in > 0 && out > 0, "linear (cuda): bad sizes B=" + std::to_string(B) +
                                              " in=" + std::to_string(in) + " out=" + std::to_string(out));
  // Leading dimensions and products handed to cuBLAS are ints.
  to_int(B, "B");
  to_int(in, "in");
  to_int(out, "out");
}

// One block row per matrix row, so no element needs a division for its column.
struct RowGrid {
  dim3 grid, block;
};
RowGrid row_grid(int64_t rows, int64_t cols) {
  const int threads = static_cast<int>(std::clamp<int64_t>((cols + 31) / 32 * 32, 32, kThreads));
  const int64_t chunks = (cols + threads - 1) / threads;
  LS_REQUIRE(rows <= INT_MAX && chunks <= 65535,
             "linear (cuda): " + std::to_string(rows) + " x " + std::to_string(cols) + " is too large");
  return {dim3(static_cast<unsigned>(rows), static_cast<unsigned>(chunks)), dim3(static_cast<unsigned>(threads))};
}

using cuda::load;
using cuda::store;

// y[r, o] = relu?(acc[r, o] + b[o]) (b nullable). acc may equal y (fp32).
// acc, y [rows, cols]
template <typename Out>
__global__ void bias_act_kernel(int64_t cols, const float* acc, const float* b, bool relu, Out* y) {
  const int64_t o = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (o >= cols) return;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * cols + o;
  float v = acc[i];
  if (b) v += b[o];
  if (relu) v = v > 0.f ? v : 0.f;
  store(y, i, v);
}

// db[o] (+)= sum over rows r of dy[r, o].   dy [rows, cols], db [cols]
// A block covers 32 columns (one per lane: coalesced row reads) with 8 warps
// taking every 8th row; the 8 partial sums are added in warp order. The order
// depends only on the shape: deterministic.
constexpr int kSumWarps = 8;
template <typename T>
__global__ void column_sums_kernel(int64_t rows, int64_t cols, const T* dy, float* db, bool accumulate) {
  __shared__ float part[kSumWarps][33];
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * 32 + lane;
  float acc = 0.f;
  if (o < cols)
    for (int64_t r = warp; r < rows; r += kSumWarps) acc += load(dy, r * cols + o);
  part[warp][lane] = acc;
  __syncthreads();
  if (warp == 0 && o < cols) {
    float s = part[0][lane];
    for (int k = 1; k < kSumWarps; ++k) s += part[k][lane];
    db[o] = accumulate ? db[o] + s : s;
  }
}

template <typename T>
void launch_column_sums(int64_t rows, int64_t cols, const T* dy, float* db, bool accumulate, cudaStream_t stream) {
  const int64_t blocks = (cols + 31) / 32;
  LS_REQUIRE(blocks <= INT_MAX, "linear (cuda): too many output features");
  column_sums_kernel<T><<<static_cast<unsigned>(blocks), 32 * kSumWarps, 0, stream>>>(rows, cols, dy, db, accumulate);
  LS_CUDA_CHECK_LAUNCH();
}

// cuBLAS's name for a 16-bit storage type (throws for any other).
cudaDataType cuda_type_16(DType dt) {
  LS_REQUIRE(dt == DType::BF16 || dt == DType::F16,
             std::string("linear (cuda): 16-bit GEMM given ") + std::string(dtype_name(dt)) + " data");
  return dt == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

// B == 0: no samples; the gradients are zero (or unchanged when accumulating).
void zero_grads_if_overwriting(int64_t in, int64_t out, float* dw, float* db, bool accumulate, cudaStream_t stream) {
  if (accumulate) return;
  LS_CUDA_CHECK(cudaMemsetAsync(dw, 0, static_cast<size_t>(in * out) * sizeof(float), stream));
  if (db) LS_CUDA_CHECK(cudaMemsetAsync(db, 0, static_cast<size_t>(out) * sizeof(float), stream));
}

void forward_f32(cuda::Context& ctx, int64_t B, int64_t in, int64_t out, const float* x, const float* w,
                         const float* b, float* y, bool relu) {
  check_sizes(B, in, out);
  if (B == 0) return;
  const float one = 1.f, zero = 0.f;
  // y^T [out, B] = (w^T)^T [out, in] * x^T [in, B]   (see the derivation at the top)
  LS_CUBLAS_CHECK(ctx.blas().sgemm(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(B),
                                   static_cast<int>(in), &one, w, static_cast<int>(in), x, static_cast<int>(in), &zero,
                                   y, static_cast<int>(out)));
  if (b || relu) {
    const RowGrid g = row_grid(B, out);
    bias_act_kernel<float><<<g.grid, g.block, 0, ctx.raw_stream()>>>(out, y, b, relu, y);
    LS_CUDA_CHECK_LAUNCH();
  }
}

void backward_f32(cuda::Context& ctx, int64_t B, int64_t in, int64_t out, const float* x, const float* w,
                          const float* y, float* dy, float* dx, float* dw, float* db, bool accumulate, bool relu) {
  check_sizes(B, in, out);
  const cudaStream_t stream = ctx.raw_stream();
  if (B == 0) {
    zero_grads_if_overwriting(in, out, dw, db, accumulate, stream);
    return;
  }
  if (relu) relu_mask_cuda<float>(B * out, y, dy, stream);
  const float one = 1.f, zero = 0.f;
  const float beta = accumulate ? 1.f : 0.f;
  // dw^T [in, out] (+)= x^T [in, B] * dy [B, out]
  LS_CUBLAS_CHECK(ctx.blas().sgemm(ctx.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(in), static_cast<int>(out),
                                   static_cast<int>(B), &one, x, static_cast<int>(in), dy, static_cast<int>(out), &beta,
                                   dw, static_cast<int>(in)));
  if (db) launch_column_sums<float>(B, out, dy, db, accumulate, stream);
  if (dx) {
    // dx^T [in, B] = w^T [in, out] * dy^T [out, B]
    LS_CUBLAS_CHECK(ctx.blas().sgemm(ctx.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(in), static_cast<int>(B),
                                     static_cast<int>(out), &one, w, static_cast<int>(in), dy, static_cast<int>(out),
                                     &zero, dx, static_cast<int>(in)));
  }
}

void forward_16(DType dt, cuda::Context& ctx, int64_t B, int64_t in, int64_t out, const void* x,
                            const void* w, const float* b, void* y, bool relu) {
  check_sizes(B, in, out);
  const cudaDataType t16 = cuda_type_16(dt);
  if (B == 0) return;
  const float one = 1.f, zero = 0.f;
  const bool epilogue = b || relu;
  // With an epilogue, the GEMM writes fp32 scratch and the epilogue rounds to
  // the 16-bit type once; without one, the GEMM writes the 16-bit y directly.
  void* c = epilogue ? ctx.workspace(static_cast<size_t>(B * out) * sizeof(float)) : y;
  const cudaDataType ctype = epilogue ? CUDA_R_32F : t16;
  LS_CUBLAS_CHECK(ctx.blas().gemm_ex(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(B),
                                     static_cast<int>(in), &one, w, t16, static_cast<int>(in), x, t16,
                                     static_cast<int>(in), &zero, c, ctype, static_cast<int>(out), CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
  if (epilogue) {
    const RowGrid g = row_grid(B, out);
    cuda::dispatch_16bit(dt, [&](auto tag) {
      using T = decltype(tag);
      bias_act_kernel<T><<<g.grid, g.block, 0, ctx.raw_stream()>>>(out, static_cast<const float*>(c), b, relu,
                                                                   static_cast<T*>(y));
    });
    LS_CUDA_CHECK_LAUNCH();
  }
}

void backward_16(DType dt, cuda::Context& ctx, int64_t B, int64_t in, int64_t out, const void* x,
                             const void* w, const void* y, void* dy, void* dx, float* dw, float* db, bool accumulate,
                             bool relu) {
  check_sizes(B, in, out);
  const cudaDataType t16 = cuda_type_16(dt);
  const cudaStream_t stream = ctx.raw_stream();
  if (B == 0) {
    zero_grads_if_overwriting(in, out, dw, db, accumulate, stream);
    return;
  }
  cuda::dispatch_16bit(dt, [&](auto tag) {
    using T = decltype(tag);
    if (relu) relu_mask_cuda<T>(B * out, static_cast<const T*>(y), static_cast<T*>(dy), stream);
  });
  const float one = 1.f, zero = 0.f;
  const float beta = accumulate ? 1.f : 0.f;
  // dw^T [in, out] (+)= x^T [in, B] * dy [B, out], fp32 result.
  LS_CUBLAS_CHECK(ctx.blas().gemm_ex(ctx.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(in), static_cast<int>(out),
                                     static_cast<int>(B), &one, x, t16, static_cast<int>(in), dy, t16,
                                     static_cast<int>(out), &beta, dw, CUDA_R_32F, static_cast<int>(in),
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  if (db) {
    cuda::dispatch_16bit(dt, [&](auto tag) {
      using T = decltype(tag);
      launch_column_sums<T>(B, out, static_cast<const T*>(dy), db, accumulate, stream);
    });
  }
  if (dx) {
    // dx^T [in, B] = w^T [in, out] * dy^T [out, B], 16-bit result.
    LS_CUBLAS_CHECK(ctx.blas().gemm_ex(ctx.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(in), static_cast<int>(B),
                                       static_cast<int>(out), &one, w, t16, static_cast<int>(in), dy, t16,
                                       static_cast<int>(out), &zero, dx, t16, static_cast<int>(in), CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace

void linear_forward_cuda(DType dt, cuda::Context& ctx, int64_t B, int64_t in, int64_t out, const void* x,
                         const void* w, const float* b, void* y, bool relu) {
  if (dt == DType::F32)
    forward_f32(ctx, B, in, out, static_cast<const float*>(x), static_cast<const float*>(w), b,
                static_cast<float*>(y), relu);
  else
    forward_16(dt, ctx, B, in, out, x, w, b, y, relu);
}

void linear_backward_cuda(DType dt, cuda::Context& ctx, int64_t B, int64_t in, int64_t out, const void* x,
                          const void* w, const void* y, void* dy, void* dx, float* dw, float* db, bool accumulate,
                          bool relu) {
  if (dt == DType::F32)
    backward_f32(ctx, B, in, out, static_cast<const float*>(x), static_cast<const float*>(w),
                 static_cast<const float*>(y), static_cast<float*>(dy), static_cast<float*>(dx), dw, db, accumulate,
                 relu);
  else
    backward_16(dt, ctx, B, in, out, x, w, y, dy, dx, dw, db, accumulate, relu);
}

}  // namespace lockstep::ops
