// The machine's measured sgemm rate: what a language model's MFU (model FLOPs
// utilisation) is held against on the CPU. One square 1024^3 OpenBLAS sgemm
// on each of this process's compute threads at once, repeated for about
// `seconds`, summed over the threads; every rank of a host measures at once,
// so the rate is what each gets while the others run.
#pragma once

namespace lockstep {

double measure_sgemm_gflops(double seconds = 0.3);

}  // namespace lockstep
