// The machine's measured sgemm rate: what a language model's MFU (model FLOPs
// utilisation) is held against on the CPU. A square 1024^3 OpenBLAS sgemm on
// this process's compute threads, repeated for about `seconds`; every rank of
// a host measures at once, so the rate is what each gets while the others run.
#pragma once

namespace lockstep {

double measure_sgemm_gflops(double seconds = 0.3);

}  // namespace lockstep
