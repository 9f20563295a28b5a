// Choosing OpenBLAS's fastest kernels. OpenBLAS 0.3.21 does not know AMD Zen 5
// and falls back to its Haswell (AVX2) kernels, about half the sgemm rate of
// its SkylakeX (AVX-512) kernels on the same core. OpenBLAS reads
// OPENBLAS_CORETYPE only when it is loaded, so the trainer sets it and
// re-executes itself once, before anything else happens in the process.
#pragma once

namespace lockstep {

// If OPENBLAS_CORETYPE is unset, the CPU has AVX-512 and OpenBLAS picked an
// AVX2-only core, re-exec this binary with OPENBLAS_CORETYPE=SkylakeX. Returns
// normally when nothing is to be done (or the exec failed). A user who sets
// OPENBLAS_CORETYPE keeps full control.
void select_fast_blas_kernels(char** argv);

}  // namespace lockstep
