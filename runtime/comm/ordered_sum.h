// out[i] = ((s[0][i] + s[1][i]) + s[2][i]) + ... for count sources: the one
// summation order every reduction path of lockstep uses, so they agree
// bitwise. `out` may be one of the sources (every source of an element is
// read before it is written).
#pragma once

#include <cstdint>

namespace lockstep {

void sum_in_rank_order(const float* const* sources, int count, int64_t n, float* out);

}  // namespace lockstep
