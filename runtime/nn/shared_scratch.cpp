// SharedScratch: the convolutions' shared per-thread buffers.
#include "nn/shared_scratch.h"

namespace lockstep {

HeldMemory SharedScratch::held_memory() const {
  HeldMemory h;
  h.scratch = ws_.thread_bytes() + ws_.shared_bytes();
  return h;
}

}  // namespace lockstep
