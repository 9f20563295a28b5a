// LS_HOST_DEVICE marks a function that host code and GPU kernels share (one
// definition, so both compute the same thing): __host__ __device__ under
// nvcc, nothing for the C++ compiler.
#pragma once

#if defined(__CUDACC__)
#define LS_HOST_DEVICE __host__ __device__
#else
#define LS_HOST_DEVICE
#endif
