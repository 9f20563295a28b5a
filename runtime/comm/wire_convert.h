// Gradients on a 16-bit wire (--grad-compression fp16 / bf16): arrays of
// floats to bf16 or fp16 bit patterns and back, rounding to nearest even.
// Bitwise the same as the scalar float_to_bf16 / float_to_f16 / bf16_to_float
// / f16_to_float of comm/communicator.h for every non-NaN value (a NaN stays a
// NaN), 8 values at a time: F16C for fp16, AVX2 integer ops for bf16, where
// the CPU has them. The scalar calls went through libgcc's soft-float fp16
// conversion, one out-of-line call per value: 3.5 conversions per gradient
// value in the ordered allreduce made a compressed wire slower than fp32.
#pragma once

#include <cstdint>

#include "comm/communicator.h"

namespace lockstep {

void floats_to_wire(const float* in, int64_t n, WireType wire, uint16_t* out);
void wire_to_floats(const uint16_t* in, int64_t n, WireType wire, float* out);

}  // namespace lockstep
