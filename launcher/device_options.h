// The trainer's GPU flags onto the runtime's DeviceRuntimeOptions
// (device/device_runtime.h), and the runtime's transport back to --comm's
// spelling for messages and records.
#pragma once

#include <string_view>

#include "device/device_runtime.h"
#include "options.h"

namespace lockstep {

DeviceRuntimeOptions device_runtime_options(const TrainConfig& config);
std::string_view comm_name(GpuTransport t);  // "auto", "nccl", "mpi"

}  // namespace lockstep
