// Re-exec with OPENBLAS_CORETYPE=SkylakeX where that is faster.
#include "blas_select.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "core/cpu.h"

namespace lockstep {

void select_fast_blas_kernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const std::string core = blas_core_name();
  const bool avx2_only_core = core == "Haswell" || core == "Zen" || core == "haswell" || core == "zen";
  if (!avx2_only_core || !cpu_has_avx512()) return;
  if (setenv("OPENBLAS_CORETYPE", "SkylakeX", 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE");  // exec failed: carry on with what OpenBLAS chose
}

}  // namespace lockstep
