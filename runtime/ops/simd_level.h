// Which clone of lockstep's vector kernels (LS_SIMD_CLONES, ops/simd.h) this
// process runs, for start-up lines and benchmarks.
#pragma once

#include <string>

namespace lockstep::ops {

// "x86-64-v3" (AVX2, FMA, BMI, ...) or "x86-64 baseline", picked by the same
// resolver on the same feature bits as LS_SIMD_CLONES; "not cloned" in
// builds without clones (clang, TSan).
std::string simd_clone_level();

}  // namespace lockstep::ops
