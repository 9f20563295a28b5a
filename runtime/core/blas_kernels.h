// OpenBLAS's kernel family: which one this CPU should run, which one runs,
// and the start-up call that switches. OpenBLAS 0.3.21 picks its kernels by
// CPU model; on models it does not know it falls back to an older family
// (Prescott, SSE3, on recent AVX-512 Xeons; Haswell on AMD Zen 5). Prescott
// runs a single-thread sgemm at 40 GFLOP/s where SkylakeX runs 101 (Zen 4,
// forced; docs/benchmarks.md). lockstep chooses from what the CPU can do.
// OpenBLAS reads OPENBLAS_CORETYPE only when it is loaded, so a program that
// should switch sets it and re-executes itself once, first thing in main().
#pragma once

#include <string>
#include <string_view>

#include "core/cpu_features.h"

namespace lockstep {

// Set beside OPENBLAS_CORETYPE for the re-executed process: "core|reason|reported".
constexpr const char* kBlasChoiceVariable = "LOCKSTEP_BLAS_CHOICE";

struct BlasKernelChoice {
  std::string core;    // the family to ask OpenBLAS for; empty: keep its own choice
  std::string reason;  // the features that decided it: "AVX-512", "AVX2 and FMA"
};

// The decision, a pure function of OpenBLAS's family name (any case) and the
// CPU's features:
//   AVX-512 (F, BW, VL, DQ): SkylakeX, unless OpenBLAS already runs an
//     AVX-512 family (SkylakeX, Cooperlake, SapphireRapids);
//   otherwise AVX2 and FMA: Haswell, unless OpenBLAS runs one of those or
//     its own AVX2 families (Haswell, Zen, Excavator);
//   otherwise OpenBLAS's choice stands.
// Any other name (Prescott, Core2, Katmai, Nehalem, Sandybridge, ...) on such
// a CPU means OpenBLAS did not recognise it.
BlasKernelChoice choose_blas_kernels(std::string_view reported, const CpuFeatures& cpu);

// The kernels this process runs and who picked them.
struct BlasKernels {
  enum class Source { OpenBLAS, User, Lockstep };
  std::string in_use;            // OpenBLAS's name for its kernels now
  Source source = Source::OpenBLAS;
  std::string user_value;        // User: OPENBLAS_CORETYPE as set
  std::string asked, reason;     // Lockstep: the family asked for and why
  std::string reported;          // Lockstep: what OpenBLAS had picked itself
  // "SkylakeX (chosen: AVX-512; OpenBLAS reported Prescott)",
  // "Prescott (OPENBLAS_CORETYPE=Prescott)", "Cooperlake".
  std::string describe() const;
};

// OpenBLAS's name for the kernels it runs ("Haswell", "SkylakeX", ...).
std::string blas_core_name();

// What runs in this process, from OpenBLAS and the two variables above.
BlasKernels blas_kernels_in_use();

// Call first in main(), before MPI_Init and before any thread starts. When
// OPENBLAS_CORETYPE is unset and choose_blas_kernels() names a family, sets
// it (and kBlasChoiceVariable) and re-executes this program with the same
// argv; the new process finds the variable set and carries on. Returns
// normally when there is nothing to change or the exec fails. A user's
// OPENBLAS_CORETYPE is always kept.
void use_fast_blas_kernels(char** argv);

}  // namespace lockstep
