// DeviceRuntime: a rank's GPU services for a training loop, configured by
// DeviceRuntimeOptions (the trainer maps its flags onto them; a program
// linking the library fills them itself).
//
//   constructor  local: picks the rank's GPU from its local rank (the NCCL
//                transport needs a GPU per local rank; staging through MPI
//                lets ranks share one), makes the device context (compute
//                stream, caching allocator, cuBLAS/cuDNN handles) and a copy
//                stream. With conv_benchmark, each convolution race's outcome
//                goes to `log` at debug level.
//   connect()    collective with the NCCL transport: bootstraps the NCCL
//                communicator through the host communicator (MPI).
//   upload()     a host batch to the device: the copy stream waits until the
//                compute stream has finished with the device slot's previous
//                batch, copies from the loader's page-locked slot, and the
//                compute stream waits for the copy (events: no host stall of
//                the GPU). Returns once the host batch has been read, so the
//                loader may refill it. The 7th upload starts a profiler's
//                collection (cudaProfilerStart; ncu --profile-from-start
//                off): steady-state steps only.
//   device_step() the step's device-side state (optim/device_step.h): made
//                when the step needs it on the device (a dynamic loss scale,
//                clipping or graphs); null otherwise.
//   set_step(),  graphs: the step's learning rate and counter copied into
//   run_step()   device memory before the step, then the step's work run
//                eagerly while buffers settle (the first kGraphWarmup steps
//                after start or invalidate_graphs()), captured into a CUDA
//                graph once per batch slot, and replayed from then on: one
//                launch per step instead of one per kernel. The host stays at
//                most one step ahead, waiting (bounded by
//                collective_timeout_s, NCCL errors polled) for the step
//                before.
// device_runtime.cpp in CUDA builds; without CUDA (device_runtime_none.cpp)
// the constructor throws an input error about the GPU device.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "core/logging.h"
#include "data/loader.h"
#include "optim/step_rule.h"

namespace lockstep {

namespace cuda {
class Context;
}
class NcclCommunicator;
class DeviceStep;

// How gradients and statistics travel between GPU ranks.
enum class GpuTransport {
  Auto,    // NCCL when every local rank can have a GPU of its own, else Staged
  Nccl,    // device buffers through NCCL; one GPU per local rank
  Staged,  // copied to the host and reduced through the host communicator (MPI); ranks may share a GPU
};

struct DeviceRuntimeOptions {
  GpuTransport transport = GpuTransport::Auto;
  double collective_timeout_s = 300;  // bound on waits for NCCL and for graph steps (0: none)
  // cuDNN convolutions: race the algorithms once per shape (else cuDNN's
  // heuristic), deterministic ones only, the workspace allowed.
  bool conv_benchmark = false;
  bool conv_deterministic = false;
  size_t conv_workspace_bytes = size_t{512} << 20;
  // The step's device-side state (device_step()): made when the loss scale is
  // dynamic, clipping is on or graphs are captured.
  StepConfig step;
  bool graphs = false;  // capture the step into CUDA graphs (needs the NCCL transport)
};

class DeviceRuntime {
 public:
  DeviceRuntime(const DeviceRuntimeOptions& options, const Communicator& comm, Logger log = nullptr);
  ~DeviceRuntime();
  DeviceRuntime(const DeviceRuntime&) = delete;
  DeviceRuntime& operator=(const DeviceRuntime&) = delete;

  void connect(Communicator& comm);  // collective (the NCCL transport)

  cuda::Context& gpu();
  NcclCommunicator* nccl();  // null before connect() and when staged
  GpuTransport transport() const;  // Nccl or Staged (Auto resolved)
  std::shared_ptr<Allocator> device_allocator();
  std::shared_ptr<Allocator> host_allocator();  // page-locked: the loaders' batch slots

  const Batch& upload(const Batch& host);
  void begin_step();
  DeviceStep* device_step();  // null when the options need none
  StepState read_step_state();  // waits for the device; needs device_step()
  void restore_step_state(const StepState& s);  // a resumed or broadcast state; needs device_step()

  // Graphs (see above). set_step's pointers are device memory and stay the
  // same for the whole run.
  static constexpr int kGraphWarmup = 2;
  struct StepScalars {
    const float* lr = nullptr;
    const int64_t* step = nullptr;
  };
  StepScalars set_step(float lr, int64_t step);
  enum class StepRun { Eager, Captured, Replayed };
  // `slot`: the batch's device address (one graph per upload slot); `queue`
  // queues the whole step (forward, loss, backward, reduction, update) on the
  // compute stream without host waits.
  StepRun run_step(const void* slot, const std::function<void()>& queue);
  void wait_graph_steps();   // bounded wait for the steps launched from graphs
  bool last_step_replayed() const;  // the last run_step replayed a graph
  void invalidate_graphs();  // after work that may move device buffers (evaluation)
  int64_t graph_captures() const;
  void synchronize();  // waits for all queued device work
  std::string describe() const;  // "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)"
  // The caching allocator's high-water marks since start (the memory report: peak and
  // reserved bytes), for the end-of-run summary; beside them the peak since
  // mark_steady_state() (the timed steps: no races, captures or first-step
  // growth) and the cuDNN workspace held at the end, which say where a peak
  // comes from.
  struct MemoryStats {
    int64_t peak_allocated_bytes = 0;  // most bytes handed out at once
    int64_t peak_reserved_bytes = 0;   // most bytes held from the driver at once
    int64_t device_mallocs = 0;        // cudaMalloc calls
    int64_t steady_peak_allocated_bytes = -1;  // since mark_steady_state(); -1: not called
    int64_t workspace_bytes = 0;       // the context's convolution scratch (cuda::Context::workspace)
  };
  void mark_steady_state();  // once, when the timed steps begin
  MemoryStats memory_stats() const;
  std::string memory_report() const;  // the same in one line

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
