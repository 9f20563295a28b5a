// Which clone of the vector kernels runs (ops/simd_level.h): a function versioned
// like LS_SIMD_CLONES, so the same resolver picks it on the same feature bits.
#include "ops/simd_level.h"

#include "ops/simd.h"

namespace lockstep::ops {

#if defined(LS_SIMD_CLONES_ENABLED)
namespace {
// Versions of one function: GCC emits their dispatcher (an ifunc, resolved on
// the x86-64-v3 feature bit as target_clones' is) where all of them are
// visible, so only here; other files call simd_clone_level() below.
__attribute__((target("default"))) const char* clone_level() { return "x86-64 baseline"; }
__attribute__((target("arch=x86-64-v3"))) const char* clone_level() { return "x86-64-v3"; }
}  // namespace
std::string simd_clone_level() { return clone_level(); }
#else
std::string simd_clone_level() { return "not cloned"; }
#endif

}  // namespace lockstep::ops
