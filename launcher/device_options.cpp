// --comm, --collective-timeout, --cudnn-*, --precision fp16's --loss-scale and
// --loss-scale-window, --clip-grad-norm and --cuda-graph onto the runtime's options.
#include "device_options.h"

namespace lockstep {

DeviceRuntimeOptions device_runtime_options(const TrainConfig& c) {
  DeviceRuntimeOptions o;
  o.transport = c.comm == GpuComm::Nccl  ? GpuTransport::Nccl
                : c.comm == GpuComm::Mpi ? GpuTransport::Staged
                                         : GpuTransport::Auto;
  o.collective_timeout_s = c.collective_timeout_s;
  o.conv_benchmark = c.cudnn_benchmark;
  o.conv_deterministic = c.cudnn_deterministic;
  o.conv_workspace_bytes = static_cast<size_t>(c.cudnn_workspace_mb) << 20;
  // fp16: a dynamic scale; otherwise a fixed scale of 1 (the step's scalars
  // still live on the device with clipping or graphs).
  o.step.loss_scale.dynamic = c.precision == Precision::F16;
  o.step.loss_scale.init_scale = o.step.loss_scale.dynamic ? c.loss_scale : 1.f;
  o.step.loss_scale.growth_interval = c.loss_scale_window;
  o.step.max_grad_norm = c.clip_grad_norm;
  o.graphs = c.cuda_graph;
  return o;
}

std::string_view comm_name(GpuTransport t) {
  switch (t) {
    case GpuTransport::Auto: return name(GpuComm::Auto);
    case GpuTransport::Nccl: return name(GpuComm::Nccl);
    case GpuTransport::Staged: return name(GpuComm::Mpi);
  }
  return "?";
}

}  // namespace lockstep
