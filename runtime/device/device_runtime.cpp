// A rank's GPU services in CUDA builds: device choice, NCCL bootstrap, batch
// uploads, the device step state, graph capture and replay.
#include "device/device_runtime.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include "comm/nccl_communicator.h"
#include "cuda/caching_allocator.h"
#include "cuda/check.h"
#include "cuda/context.h"
#include "cuda/device.h"
#include "cuda/graph.h"
#include "optim/device_step.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "core/input_subject.h"

namespace lockstep {
namespace {

GpuTransport resolve_transport(GpuTransport t, int local_size) {
  if (t != GpuTransport::Auto) return t;
  return local_size <= cuda::device_count() ? GpuTransport::Nccl : GpuTransport::Staged;
}

// The device step state is needed on the device when a step reads scalars
// there: a dynamic loss scale's, clipping's factor, a graph's learning rate.
bool needs_device_step(const DeviceRuntimeOptions& o) {
  return o.step.loss_scale.dynamic || o.step.max_grad_norm > 0.f || o.graphs;
}

// A profiler started with collection off (ncu --profile-from-start off) sees
// the device work from this training step on: past the trainer's 5 timed-out
// warm-up steps, cuDNN's algorithm search and graph captures (steps
// 3-4), so only steady-state steps. Without a profiler attached it does nothing.
constexpr int64_t kProfileFromStep = 7;

}  // namespace

struct DeviceRuntime::Impl {
  Impl(const DeviceRuntimeOptions& o, const Communicator& comm, const Logger& log)
      : transport(resolve_transport(o.transport, comm.local_size())),
        device(select(comm, o.transport)), ctx(device), timeout_s(o.collective_timeout_s) {
    cuda::ConvPolicy policy;
    policy.search = o.conv_benchmark ? cuda::ConvSearch::Benchmark : cuda::ConvSearch::Heuristic;
    policy.deterministic = o.conv_deterministic;
    policy.workspace_limit = o.conv_workspace_bytes;
    ctx.set_conv_policy(policy);
    if (log && log->should_log(spdlog::level::debug))
      ctx.set_conv_report([log](const std::string& line) { log->debug("{}", line); });
    if (needs_device_step(o)) step_state = std::make_unique<DeviceStep>(ctx, o.step);
    LS_CHECK_INPUT_ON(!o.graphs || transport == GpuTransport::Nccl, subject::kCudaGraphs,
                      ": the step needs the NCCL transport (staging gradients through the host, as ranks sharing a "
                      "GPU do, is work a graph cannot hold)");
    if (o.graphs) {
      step_dev = Tensor::zeros(Shape{sizeof(HostStep)}, DType::U8, ctx.allocator());
      for (Tensor& h : step_host) h = Tensor::zeros(Shape{sizeof(HostStep)}, DType::U8, pinned);
    }
  }

  // An explicit NCCL transport names itself when GPUs are short; with Auto
  // that cannot happen (it stages instead).
  int select(const Communicator& comm, GpuTransport asked) {
    const bool exclusive = transport == GpuTransport::Nccl;
    return cuda::select_device(comm.local_rank(), comm.local_size(), exclusive,
                               exclusive && asked == GpuTransport::Nccl ? subject::kNcclTransport
                                                                        : subject::kGpuDevice);
  }

  void wait_bounded(const cuda::Event& e) {
    if (nccl)
      nccl->wait(e, timeout_s);  // polls NCCL's error state; aborts and throws on an error or the timeout
    else
      e.synchronize();
  }

  struct Slot {
    Tensor inputs, labels;  // device memory, grown to the largest batch
    cuda::Event copied;     // on the copy stream: the batch is on the device
    cuda::Event consumed;   // on the compute stream: the last work reading the slot is queued before it
    bool recorded = false;  // consumed has been recorded at least once
  };

  GpuTransport transport;
  int device;
  cuda::Context ctx;
  std::unique_ptr<DeviceStep> step_state;  // needs_device_step() (device memory: after ctx)
  double timeout_s;
  cuda::Stream copy_stream;
  std::shared_ptr<cuda::PinnedAllocator> pinned = std::make_shared<cuda::PinnedAllocator>();
  std::unique_ptr<NcclCommunicator> nccl;
  Slot slots[2];
  int next = 0;
  bool any = false;
  Batch current;
  int64_t steps_begun = 0;

  // Graphs
  struct HostStep {
    float lr;
    int32_t unused;
    int64_t step;
  };
  Tensor step_dev;         // one HostStep in device memory, read by the captured kernels
  Tensor step_host[2];     // page-locked sources of its copies, used in turn
  cuda::Event step_copied[2];
  bool step_recorded[2] = {false, false};
  int step_slot = 0;
  std::map<const void*, cuda::CudaGraph> graphs;  // by batch slot
  int warmup_left = kGraphWarmup;
  cuda::Event graph_done[2];
  bool graph_pending[2] = {false, false};
  int graph_cur = 0;
  int64_t captures = 0;
  bool last_replayed = false;
  // The allocator's peaks before mark_steady_state() reset them (-1: not yet).
  int64_t warmup_peak_allocated = -1, warmup_peak_reserved = -1;
};

DeviceRuntime::DeviceRuntime(const DeviceRuntimeOptions& options, const Communicator& comm, Logger log)
    : impl_(std::make_unique<Impl>(options, comm, log)) {}

DeviceRuntime::~DeviceRuntime() {
  if (impl_) (void)cudaDeviceSynchronize();  // queued copies and kernels finish before their memory goes
}

void DeviceRuntime::connect(Communicator& comm) {
  if (impl_->transport != GpuTransport::Nccl) return;
  NcclCommunicator::Options o;
  o.timeout_s = impl_->timeout_s;
  impl_->nccl = NcclCommunicator::create(comm, impl_->device, o);
}

cuda::Context& DeviceRuntime::gpu() { return impl_->ctx; }
NcclCommunicator* DeviceRuntime::nccl() { return impl_->nccl.get(); }
GpuTransport DeviceRuntime::transport() const { return impl_->transport; }
std::shared_ptr<Allocator> DeviceRuntime::device_allocator() { return impl_->ctx.allocator(); }
std::shared_ptr<Allocator> DeviceRuntime::host_allocator() { return impl_->pinned; }

const Batch& DeviceRuntime::upload(const Batch& host) {
  Impl& m = *impl_;
  const cuda::Stream& compute = m.ctx.stream();
  // Everything reading the previous batch's slot is queued by now.
  if (m.any) {
    Impl::Slot& prev = m.slots[m.next ^ 1];
    prev.consumed.record(compute);
    prev.recorded = true;
  }
  Impl::Slot& s = m.slots[m.next];
  const bool grow_inputs = !s.inputs.defined() || s.inputs.numel() < host.inputs.numel() ||
                           s.inputs.dtype() != host.inputs.dtype();  // images fp32, tokens int32
  const bool grow_labels = !s.labels.defined() || s.labels.numel() < host.labels.numel();
  if (grow_inputs || grow_labels) {
    m.ctx.synchronize();  // the old blocks may still be read by queued work
    if (grow_inputs) s.inputs = Tensor::zeros(Shape{host.inputs.numel()}, host.inputs.dtype(), m.ctx.allocator());
    if (grow_labels) s.labels = Tensor::zeros(Shape{host.labels.numel()}, DType::I32, m.ctx.allocator());
    // The allocator zero-fills on the compute stream; the copy below runs on
    // the copy stream: let the fill finish first.
    m.ctx.synchronize();
  }
  if (s.recorded) s.consumed.wait_on(m.copy_stream);
  LS_CUDA_CHECK(cudaMemcpyAsync(s.inputs.raw_data(), host.inputs.raw_data(), host.inputs.nbytes(),
                                cudaMemcpyHostToDevice, m.copy_stream.get()));
  LS_CUDA_CHECK(cudaMemcpyAsync(s.labels.raw_data(), host.labels.raw_data(), host.labels.nbytes(),
                                cudaMemcpyHostToDevice, m.copy_stream.get()));
  s.copied.record(m.copy_stream);
  s.copied.wait_on(compute);
  s.copied.synchronize();  // the host slot has been read: the loader may refill it
  m.current.inputs = s.inputs.slice(0, host.inputs.shape());
  m.current.labels = s.labels.slice(0, host.labels.shape());
  m.current.index = host.index;
  m.next ^= 1;
  m.any = true;
  return m.current;
}

void DeviceRuntime::begin_step() {
  if (++impl_->steps_begun == kProfileFromStep) LS_CUDA_CHECK(cudaProfilerStart());
}

DeviceStep* DeviceRuntime::device_step() { return impl_->step_state.get(); }

StepState DeviceRuntime::read_step_state() {
  LS_CHECK(impl_->step_state, "read_step_state: no device step state (no loss scaling, clipping or graphs)");
  return impl_->step_state->read();
}

void DeviceRuntime::restore_step_state(const StepState& s) {
  LS_CHECK(impl_->step_state, "restore_step_state: no device step state (no loss scaling, clipping or graphs)");
  impl_->step_state->restore(s);
}

DeviceRuntime::StepScalars DeviceRuntime::set_step(float lr, int64_t step) {
  Impl& m = *impl_;
  LS_CHECK(m.step_dev.defined(), "set_step: the runtime was made without graphs");
  const int i = m.step_slot;
  if (m.step_recorded[i]) m.step_copied[i].synchronize();  // its last copy has read the slot
  auto* h = static_cast<Impl::HostStep*>(m.step_host[i].raw_data());
  *h = Impl::HostStep{lr, 0, step};
  LS_CUDA_CHECK(cudaMemcpyAsync(m.step_dev.raw_data(), h, sizeof(Impl::HostStep), cudaMemcpyHostToDevice,
                                m.ctx.raw_stream()));
  m.step_copied[i].record(m.ctx.stream());
  m.step_recorded[i] = true;
  m.step_slot ^= 1;
  const auto* d = static_cast<const Impl::HostStep*>(m.step_dev.raw_data());
  return {&d->lr, &d->step};
}

DeviceRuntime::StepRun DeviceRuntime::run_step(const void* slot, const std::function<void()>& queue) {
  Impl& m = *impl_;
  m.last_replayed = false;
  if (m.warmup_left > 0) {  // buffers, workspaces and NCCL's own allocations settle first
    --m.warmup_left;
    queue();
    return StepRun::Eager;
  }
  StepRun how = StepRun::Replayed;
  auto it = m.graphs.find(slot);
  if (it == m.graphs.end()) {
    it = m.graphs.emplace(slot, cuda::CudaGraph::capture(m.ctx.stream(), queue)).first;
    ++m.captures;
    how = StepRun::Captured;
  }
  it->second.launch(m.ctx.stream());
  // At most one step of run-ahead, as the eager reducer keeps it.
  m.graph_done[m.graph_cur].record(m.ctx.stream());
  m.graph_pending[m.graph_cur] = true;
  const int prev = m.graph_cur ^ 1;
  if (m.graph_pending[prev]) {
    m.wait_bounded(m.graph_done[prev]);
    m.graph_pending[prev] = false;
  }
  m.graph_cur = prev;
  m.last_replayed = how == StepRun::Replayed;
  return how;
}

void DeviceRuntime::wait_graph_steps() {
  Impl& m = *impl_;
  for (int i : {m.graph_cur ^ 1, m.graph_cur})
    if (m.graph_pending[i]) {
      m.wait_bounded(m.graph_done[i]);
      m.graph_pending[i] = false;
    }
}

void DeviceRuntime::invalidate_graphs() {
  wait_graph_steps();
  impl_->graphs.clear();
  impl_->warmup_left = kGraphWarmup;
}

int64_t DeviceRuntime::graph_captures() const { return impl_->captures; }
bool DeviceRuntime::last_step_replayed() const { return impl_->last_replayed; }

void DeviceRuntime::synchronize() { LS_CUDA_CHECK(cudaDeviceSynchronize()); }

std::string DeviceRuntime::describe() const { return cuda::device_info(impl_->device).str(); }

void DeviceRuntime::mark_steady_state() {
  Impl& m = *impl_;
  if (m.warmup_peak_allocated >= 0) return;
  const cuda::AllocatorStats s = m.ctx.allocator()->stats();
  m.warmup_peak_allocated = s.peak_allocated_bytes;
  m.warmup_peak_reserved = s.peak_reserved_bytes;
  m.ctx.allocator()->reset_peaks();
}

DeviceRuntime::MemoryStats DeviceRuntime::memory_stats() const {
  const Impl& m = *impl_;
  const cuda::AllocatorStats s = m.ctx.allocator()->stats();
  MemoryStats r{std::max(s.peak_allocated_bytes, m.warmup_peak_allocated),
                std::max(s.peak_reserved_bytes, m.warmup_peak_reserved), s.device_mallocs};
  if (m.warmup_peak_allocated >= 0) r.steady_peak_allocated_bytes = s.peak_allocated_bytes;
  r.workspace_bytes = static_cast<int64_t>(m.ctx.workspace_bytes());
  return r;
}

std::string DeviceRuntime::memory_report() const {
  const MemoryStats s = memory_stats();
  const double mib = 1 << 20;
  return fmt::format("GPU memory: peak {:.1f} MiB allocated ({}cuDNN workspace {:.1f} MiB at the end), peak {:.1f} "
                     "MiB reserved, {} cudaMalloc calls",
                     static_cast<double>(s.peak_allocated_bytes) / mib,
                     s.steady_peak_allocated_bytes < 0
                         ? std::string()
                         : fmt::format("{:.1f} MiB in the timed steps; ",
                                       static_cast<double>(s.steady_peak_allocated_bytes) / mib),
                     static_cast<double>(s.workspace_bytes) / mib, static_cast<double>(s.peak_reserved_bytes) / mib,
                     s.device_mallocs);
}

}  // namespace lockstep
