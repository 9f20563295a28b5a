// The trainer's device checks: --device cuda's (that this build has the CUDA
// parts and this machine a usable GPU), --device auto's choice, and --layout
// auto's, which follows from the device and the precision.
#pragma once

#include <string>

#include "options.h"

namespace lockstep {

// Throws InputError without CUDA support or without a usable GPU, saying which.
void check_cuda_device_usable();

// --device auto on this rank: Cuda when this build has the CUDA parts and
// the machine a visible GPU (CUDA_VISIBLE_DEVICES= hides them), else "cpu".
// `why` says what was found, for the log and for errors of options that need
// the GPU. Each rank chooses alone; the preflight check compares the choices.
struct AutoDevice {
  DeviceKind device;  // Cpu or Cuda
  std::string why;
};
AutoDevice choose_auto_device();

// --layout auto, once the device is known: "nhwc" for 16-bit precision on the
// GPU (channels-last is the order tensor-core convolutions read and write; on
// the H100 it was the faster layout for convnet and resnet50 in bf16), else
// "nchw" (the CPU's measured layout, and fp32 on the GPU, where cuDNN's
// deterministic channels-last kernels can be far slower). The layout is
// internal: inputs, weights and checkpoints are the same either way.
// `why` says which case applied, for the log.
struct AutoLayout {
  LayoutChoice layout;  // Nchw or Nhwc
  std::string why;
};
AutoLayout choose_auto_layout(DeviceKind device, Precision precision);

}  // namespace lockstep
