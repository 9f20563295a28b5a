// Host compute settings: how many threads BLAS and our OpenMP kernels use
// (OpenBLAS's kernel family: core/blas_kernels.h).
#pragma once

namespace lockstep {

// Sets the threads the CPU ops use (OpenMP); OpenBLAS is kept single-threaded
// and is called from each of those threads.
void set_compute_threads(int threads);
int compute_threads();

}  // namespace lockstep
