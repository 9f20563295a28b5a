// DeviceRuntime: the trainer's GPU side, one per rank (--device cuda).
//
//   constructor  local: picks the rank's GPU from its local rank (--comm nccl
//                needs a GPU per local rank; --comm mpi lets ranks share one),
//                makes the device context (compute stream, caching allocator,
//                cuBLAS/cuDNN handles) and a copy stream. With
//                --cudnn-benchmark, each convolution race's outcome goes to
//                `log` at debug level.
//   connect()    collective when --comm is nccl: bootstraps the NCCL
//                communicator through the host communicator (MPI).
//   upload()     a host batch to the device: the copy stream waits until the
//                compute stream has finished with the device slot's previous
//                batch, copies from the loader's page-locked slot, and the
//                compute stream waits for the copy (events: no host stall of
//                the GPU). Returns once the host batch has been read, so the
//                loader may refill it. The 7th upload starts a profiler's
//                collection (cudaProfilerStart; ncu --profile-from-start
//                off): steady-state steps only.
//   loss_scaler() --precision fp16: the rank's dynamic loss scale on the
//                device (optim/loss_scaler.h); with --cuda-graph or
//                --clip-grad-norm, a fixed scale of 1 that carries the
//                step's device-side scalars and clip factor; null otherwise.
//   set_step(),  --cuda-graph: the step's learning rate and counter copied
//   run_step()   into device memory before the step, then the step's work
//                run eagerly while buffers settle (the first kGraphWarmup
//                steps after start or invalidate_graphs()), captured into a
//                CUDA graph once per batch slot, and replayed from then on:
//                one launch per step instead of one per kernel. The host
//                stays at most one step ahead, waiting (bounded by
//                --collective-timeout, NCCL errors polled) for the step
//                before.
// Without CUDA support the constructor throws (options refuse --device cuda
// earlier, with a one-line error).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "core/logging.h"
#include "data/loader.h"
#include "optim/loss_scale_rule.h"
#include "options.h"

namespace lockstep {

namespace cuda {
class Context;
}
class NcclCommunicator;
class LossScaler;

class DeviceRuntime {
 public:
  DeviceRuntime(const TrainConfig& config, const Communicator& comm, Logger log = nullptr);
  ~DeviceRuntime();
  DeviceRuntime(const DeviceRuntime&) = delete;
  DeviceRuntime& operator=(const DeviceRuntime&) = delete;

  void connect(Communicator& comm);  // collective (nccl)

  cuda::Context& gpu();
  NcclCommunicator* nccl();  // null before connect() and with --comm mpi
  const std::string& comm_mode() const;  // "nccl" or "mpi" (--comm auto resolved)
  std::shared_ptr<Allocator> device_allocator();
  std::shared_ptr<Allocator> host_allocator();  // page-locked: the loaders' batch slots

  const Batch& upload(const Batch& host);
  void begin_step();
  LossScaler* loss_scaler();  // --precision fp16, --cuda-graph or --clip-grad-norm; null otherwise
  LossScaleState read_loss_scale();  // waits for the device (fp16, --cuda-graph or --clip-grad-norm)
  void restore_loss_scale(const LossScaleState& s);  // fp16 only

  // --cuda-graph (see above). set_step's pointers are device memory and stay
  // the same for the whole run.
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
  std::string describe() const;  // "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB), --comm nccl"
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
