// Thread and BLAS-kernel settings.
#include "core/cpu.h"

#include <cblas.h>
#include <omp.h>

namespace lockstep {

void set_compute_threads(int threads) {
  // The ops parallelise over the batch themselves and call OpenBLAS from each
  // thread; OpenBLAS's own pool stays at one thread so the two never compete.
  openblas_set_num_threads(1);
  omp_set_num_threads(threads);
}

int compute_threads() { return omp_get_max_threads(); }

std::string blas_core_name() { return openblas_get_corename(); }

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

}  // namespace lockstep
