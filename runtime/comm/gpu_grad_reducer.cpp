// GPU gradient reduction: NCCL buckets ordered by events, or MPI staging
// (GPU builds only; make_grad_reducer builds it).
#include "comm/gpu_grad_reducer.h"

#include <nccl.h>

#include <chrono>

#include "comm/nccl_communicator.h"
#include "comm/staged_allreduce.h"
#include "cuda/context.h"
#include "ops/elementwise/elementwise_cuda.h"

namespace lockstep {

struct GpuGradReducer::Impl {
  Impl(cuda::Context& g, Communicator& h, NcclCommunicator* n, Tensor gr, std::vector<Bucket> b, Options o)
      : gpu(g), host(h), nccl(n), grads(std::move(gr)), buckets(std::move(b)), options(o) {
    LS_CHECK(grads.device().is_cuda() && grads.dtype() == DType::F32, "GpuGradReducer: gradients must be F32 on a GPU");
    if (nccl) {
      ready_events.resize(buckets.size());
      if (options.wire != WireType::F32)
        wire_buf = Tensor::zeros(Shape{grads.numel()}, options.wire == WireType::BF16 ? DType::BF16 : DType::F16,
                                 gpu.allocator());
    } else {
      staged = std::make_unique<StagedAllreduce>();
    }
  }

  void launch(size_t i) {
    const Bucket& b = buckets[i];
    ready_events[i].record(gpu.stream());
    CollectiveScope scope(options.tracker, CollectiveKind::Bucket, static_cast<int32_t>(i));
    const ReduceOp op = options.average ? ReduceOp::Average : ReduceOp::Sum;
    float* g = grads.data<float>() + b.begin;
    if (options.wire == WireType::F32) {
      nccl->allreduce(g, b.numel(), DType::F32, op, &ready_events[i]);
      return;
    }
    // Round, reduce and widen on the communication stream, after the bucket's
    // gradients are final; the 16-bit buffer is reused step after step in
    // stream order.
    const cudaStream_t s = nccl->stream().get();
    const DType kind = options.wire == WireType::BF16 ? DType::BF16 : DType::F16;
    void* w = static_cast<char*>(wire_buf.raw_data()) + b.begin * 2;
    ready_events[i].wait_on(nccl->stream());
    ops::to_16bit_cuda(b.numel(), kind, g, w, s);
    nccl->allreduce(w, b.numel(), wire_buf.dtype(), op, nullptr);
    ops::from_16bit_cuda(b.numel(), kind, w, g, s);
  }

  cuda::Context& gpu;
  Communicator& host;
  NcclCommunicator* nccl;
  Tensor grads;
  std::vector<Bucket> buckets;
  Options options;
  Tensor wire_buf;                        // nccl with a 16-bit wire: the rounded gradients
  std::unique_ptr<StagedAllreduce> staged;
  std::vector<cuda::Event> ready_events;  // nccl: per bucket, on the compute stream
  cuda::Event done[2];                    // this step's and the previous step's collectives finished
  int cur = 0;
  bool previous_pending = false;          // done[cur ^ 1] recorded and not yet waited for
  bool armed = false;
  size_t next = 0;
  double last_wait = 0;
};

GpuGradReducer::GpuGradReducer(cuda::Context& gpu, Communicator& host, NcclCommunicator* nccl, Tensor grads,
                               std::vector<Bucket> buckets, Options options)
    : impl_(std::make_unique<Impl>(gpu, host, nccl, std::move(grads), std::move(buckets), options)) {}

GpuGradReducer::~GpuGradReducer() = default;

void GpuGradReducer::arm() {
  impl_->armed = true;
  impl_->next = 0;
}

void GpuGradReducer::ready(int64_t end) {
  Impl& m = *impl_;
  if (!m.armed || !m.nccl || !m.options.overlap) return;
  while (m.next < m.buckets.size() && m.buckets[m.next].end <= end) m.launch(m.next++);
}

void GpuGradReducer::finish() {
  Impl& m = *impl_;
  const auto t0 = std::chrono::steady_clock::now();
  if (!m.armed) m.next = 0;
  if (m.nccl) {
    while (m.next < m.buckets.size()) m.launch(m.next++);
    m.nccl->record_done(m.done[m.cur]);
    m.done[m.cur].wait_on(m.gpu.stream());  // the optimizer reads reduced gradients
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    LS_CUDA_CHECK(cudaStreamIsCapturing(m.gpu.raw_stream(), &capturing));
    if (capturing != cudaStreamCaptureStatusNone) {
      // A CUDA graph is being captured (--cuda-graph): the event above is a
      // graph edge, not a record the host could wait for, and the host must
      // not wait here; DeviceRuntime::run_step bounds the run-ahead instead.
      m.previous_pending = false;
    } else {
      // Bounded host wait for the previous step's collectives (one step of run-ahead).
      if (m.previous_pending) m.nccl->wait(m.done[m.cur ^ 1], m.options.timeout_s);
      m.previous_pending = true;
    }
    m.cur ^= 1;
  } else {
    m.ready_events.resize(1);
    m.ready_events[0].record(m.gpu.stream());
    {
      CollectiveScope scope(m.options.tracker, CollectiveKind::Bucket, 0);
      m.staged->allreduce(m.host, m.grads.raw_data(), m.grads.numel(), ReduceOp::Sum, &m.ready_events[0],
                          m.options.wire);
    }
    m.staged->record_done(m.done[0]);
    m.done[0].wait_on(m.gpu.stream());
  }
  m.armed = false;
  m.last_wait = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (m.options.timeline)
    m.options.timeline->span(m.nccl ? "nccl: wait for previous step" : "mpi staged allreduce", "comm",
                             Timeline::kCompute, t0, std::chrono::steady_clock::now());
}

void GpuGradReducer::drain() {
  Impl& m = *impl_;
  if (m.nccl) {
    m.nccl->wait(m.options.timeout_s);
    m.previous_pending = false;
  } else {
    m.staged->synchronize();
  }
}

float GpuGradReducer::grad_scale() const {
  if (!impl_->options.average || impl_->nccl) return 1.f;  // ncclAvg already averaged
  return 1.f / static_cast<float>(impl_->host.size());
}

double GpuGradReducer::last_wait_seconds() const { return impl_->last_wait; }
const std::vector<Bucket>& GpuGradReducer::buckets() const { return impl_->buckets; }
bool GpuGradReducer::overlapping() const { return impl_->nccl && impl_->options.overlap; }

std::string GpuGradReducer::describe() const {
  if (!impl_->nccl) return "MPI staged through pinned host memory";
  // The library loaded at run time (e.g. PyTorch's), and the headers built against when they differ.
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) v = NCCL_VERSION_CODE;
  std::string s = fmt::format("NCCL {}.{}.{}", v / 10000, v / 100 % 100, v % 100);
  if (v != NCCL_VERSION_CODE) s += fmt::format(" (built with {}.{}.{})", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
  return s;
}


}  // namespace lockstep
