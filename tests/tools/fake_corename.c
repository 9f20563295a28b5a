// LD_PRELOAD shim for tests/trainer/blas_kernels.sh: until OPENBLAS_CORETYPE
// is set, OpenBLAS's openblas_get_corename() answers FAKE_OPENBLAS_CORENAME
// (default "Prescott"), as OpenBLAS 0.3.21 does on a CPU it does not
// recognise; once it is set, the real OpenBLAS answers. So the unrecognised
// CPU can be met on any machine, and the re-executed process reports the
// kernels it really runs.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

char* openblas_get_corename(void) {
  if (getenv("OPENBLAS_CORETYPE") == NULL) {
    const char* fake = getenv("FAKE_OPENBLAS_CORENAME");
    return (char*)(fake != NULL ? fake : "Prescott");
  }
  char* (*real)(void) = (char* (*)(void))dlsym(RTLD_NEXT, "openblas_get_corename");
  return real != NULL ? real() : (char*)"(no OpenBLAS)";
}
