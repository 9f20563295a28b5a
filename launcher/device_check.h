// --device cuda's check: that this build has the CUDA parts and this
// machine a usable GPU; one InputError naming the flag otherwise.
#pragma once

namespace lockstep {

// Throws InputError without CUDA support or without a usable GPU, saying which.
void check_cuda_device_usable();

}  // namespace lockstep
