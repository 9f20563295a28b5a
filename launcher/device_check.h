// The trainer's device checks: --device cuda's (that this build has the CUDA
// parts and this machine a usable GPU) and --device auto's choice.
#pragma once

#include <string>

namespace lockstep {

// Throws InputError without CUDA support or without a usable GPU, saying which.
void check_cuda_device_usable();

// --device auto on this rank: "cuda" when this build has the CUDA parts and
// the machine a visible GPU (CUDA_VISIBLE_DEVICES= hides them), else "cpu".
// `why` says what was found, for the log and for errors of options that need
// the GPU. Each rank chooses alone; the preflight check compares the choices.
struct AutoDevice {
  std::string device;
  std::string why;
};
AutoDevice choose_auto_device();

}  // namespace lockstep
