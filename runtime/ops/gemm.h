// Single-precision GEMM on the host (OpenBLAS), row-major:
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C
// Dimensions are element counts; leading dimensions are row strides in elements.
#pragma once

#include <cstdint>

namespace lockstep::ops {

enum class Trans { N, T };

void sgemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

}  // namespace lockstep::ops
