// DeviceRuntime in a build without CUDA: it cannot be made (the trainer
// refuses a GPU run before it gets here, with a one-line error).
#include "device/device_runtime.h"

#include "core/error.h"
#include "core/input_subject.h"

namespace lockstep {

struct DeviceRuntime::Impl {};

DeviceRuntime::DeviceRuntime(const DeviceRuntimeOptions&, const Communicator&, Logger) {
  LS_INPUT_ERROR_ON(subject::kGpuDevice, ": this build has no CUDA support");
}
DeviceRuntime::~DeviceRuntime() = default;

// Never reached: no DeviceRuntime exists in this build.
void DeviceRuntime::connect(Communicator&) {}
cuda::Context& DeviceRuntime::gpu() { LS_THROW("no GPU in this build"); }
NcclCommunicator* DeviceRuntime::nccl() { return nullptr; }
GpuTransport DeviceRuntime::transport() const { return GpuTransport::Staged; }
std::shared_ptr<Allocator> DeviceRuntime::device_allocator() { return cpu_allocator(); }
std::shared_ptr<Allocator> DeviceRuntime::host_allocator() { return cpu_allocator(); }
const Batch& DeviceRuntime::upload(const Batch& host) { return host; }
void DeviceRuntime::begin_step() {}
DeviceStep* DeviceRuntime::device_step() { return nullptr; }
StepState DeviceRuntime::read_step_state() { LS_THROW("no GPU in this build"); }
void DeviceRuntime::restore_step_state(const StepState&) { LS_THROW("no GPU in this build"); }
DeviceRuntime::StepScalars DeviceRuntime::set_step(float, int64_t) { LS_THROW("no GPU in this build"); }
DeviceRuntime::StepRun DeviceRuntime::run_step(const void*, const std::function<void()>&) {
  LS_THROW("no GPU in this build");
}
void DeviceRuntime::wait_graph_steps() {}
void DeviceRuntime::invalidate_graphs() {}
int64_t DeviceRuntime::graph_captures() const { return 0; }
bool DeviceRuntime::last_step_replayed() const { return false; }
void DeviceRuntime::synchronize() {}
std::string DeviceRuntime::describe() const { return "none"; }
void DeviceRuntime::mark_steady_state() {}
DeviceRuntime::MemoryStats DeviceRuntime::memory_stats() const { return {}; }
std::string DeviceRuntime::memory_report() const { return ""; }

}  // namespace lockstep
