// What this CPU can run: the instruction-set features that OpenBLAS's kernel
// families need, read from CPUID (with the OS's consent to use the wide
// registers). lockstep's own vector kernels are dispatched by the loader on
// the same feature bits (ops/simd.h).
#pragma once

#include <string>

namespace lockstep {

struct CpuFeatures {
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false;
  bool amx = false;  // AMX tiles with bf16 (Sapphire Rapids and later)

  // The AVX-512 subset OpenBLAS's SkylakeX kernels use (F, BW, VL, DQ).
  bool avx512() const { return avx512f && avx512bw && avx512vl && avx512dq; }
  bool avx2_fma() const { return avx2 && fma; }
  // "AVX-512 (F, BW, VL, DQ), AVX-512-BF16, AMX", "AVX2, FMA", "no AVX2".
  std::string describe() const;
};

// This machine's features (x86-64; all false elsewhere).
CpuFeatures cpu_features();

}  // namespace lockstep
