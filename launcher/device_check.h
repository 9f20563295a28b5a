// --device cuda's check: that this build has the CUDA parts and this
// machine a usable GPU; one InputError naming the flag otherwise.
#pragma once

namespace lockstep {

// Throws InputError: without CUDA support or a GPU, saying which; with a GPU,
// saying that the training loop does not run on it yet (docs/gpu.md).
void check_cuda_device_usable();

}  // namespace lockstep
