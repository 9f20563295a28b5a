// Single-precision GEMM on the host, row-major:
//   sgemm        C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C   (OpenBLAS)
//   sgemm_small  C[M,N] (+)= op(A)[M,K] * B[K,N] for the small-channel products
//                of Winograd convolution (register-blocked kernel, OpenBLAS
//                where that is faster)
// Dimensions are element counts; leading dimensions are row strides in elements.
#pragma once

#include <cstdint>

namespace lockstep::ops {

enum class Trans { N, T };

void sgemm(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// C = op(A) * B, or C += op(A) * B with `accumulate`. op(A) is A (M x K,
// row-major) or A^T (A stored K x M); B is K x N row-major; N must be a
// multiple of 8. OpenBLAS packs both operands into panels on every call, which
// for the products of a Winograd convolution with 16-64 channels costs as much
// as the multiplies; this kernel reads A and B where they lie and writes C
// once. It runs where it was measured faster than OpenBLAS (machines with AVX2
// and FMA; N and K up to 128, or M and N up to 64 for A^T) and hands every
// other call to sgemm. The choice depends on the shape and the CPU only, so a
// given shape always sums in the same order.
void sgemm_small(Trans ta, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                 int64_t ldb, float* C, int64_t ldc, bool accumulate);

// Which of the two sgemm_small uses for a shape (for tests and benchmarks).
bool sgemm_small_uses_kernel(Trans ta, int64_t M, int64_t N, int64_t K);
// Whether this CPU runs the kernel at all (AVX2 and FMA, in a build with the clones).
bool sgemm_small_kernel_available();
// The register-blocked kernel alone, whatever the shape and CPU (for tests).
void sgemm_small_kernel(Trans ta, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                        int64_t ldb, float* C, int64_t ldc, bool accumulate);

}  // namespace lockstep::ops
