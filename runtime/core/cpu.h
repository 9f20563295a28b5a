// Host compute settings: how many threads BLAS and our OpenMP kernels use,
// and which OpenBLAS kernel family is active.
#pragma once

#include <string>

namespace lockstep {

// Sets the threads the CPU ops use (OpenMP); OpenBLAS is kept single-threaded
// and is called from each of those threads.
void set_compute_threads(int threads);
int compute_threads();
// OpenBLAS's name for the kernels it selected ("Haswell", "SkylakeX", ...).
std::string blas_core_name();
// True when the CPU can run OpenBLAS's SkylakeX (AVX-512) kernels.
bool cpu_has_avx512();

}  // namespace lockstep
