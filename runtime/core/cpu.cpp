// Thread settings (cpu.h).
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

}  // namespace lockstep
