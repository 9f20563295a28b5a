// DistributedOptimizer: bucket plan, state broadcast, reduce-then-step.
#include "optim/distributed_optimizer.h"

#include <algorithm>
#include <cmath>

#include "optim/grad_clip.h"

#ifdef LOCKSTEP_HAVE_CUDA
#include "optim/loss_scaler.h"
#endif

namespace lockstep {

std::vector<Bucket> plan_buckets(const ParameterStore& params, int64_t bucket_bytes, int64_t first_bucket_bytes) {
  LS_CHECK(bucket_bytes > 0, "bucket size {} must be positive", bucket_bytes);
  // Parameter ranges in buffer order (reverse declaration order = backward order).
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const auto& p : params.params()) ranges.emplace_back(p.offset, p.offset + p.numel());
  std::sort(ranges.begin(), ranges.end());
  std::vector<Bucket> buckets;
  const int64_t cap = std::max<int64_t>(1, bucket_bytes / static_cast<int64_t>(sizeof(float)));
  const int64_t first_cap =
      first_bucket_bytes > 0 ? std::max<int64_t>(1, std::min(first_bucket_bytes, bucket_bytes) / 4) : cap;
  // DDP's rule (compute_bucket_assignment_by_size): a parameter joins the open
  // bucket, which closes once it holds at least its cap. So a parameter larger
  // than the cap shares a bucket with the ones before it and that bucket is
  // ready as soon as its backward is done: a large dense layer at the end of a
  // network is reduced while the convolutions' backward runs. Closing a bucket
  // before it would overflow instead put such a layer into the next bucket,
  // with everything after it, ready only when backward ends.
  bool open = false;
  for (size_t i = 0; i < ranges.size(); ++i) {
    // A parameter's range runs to the next parameter's offset (alignment padding included).
    const int64_t begin = ranges[i].first;
    const int64_t end = i + 1 < ranges.size() ? ranges[i + 1].first : params.padded_numel();
    if (open)
      buckets.back().end = end;
    else
      buckets.push_back({begin, end});
    open = buckets.back().numel() < (buckets.size() == 1 ? first_cap : cap);
  }
  return buckets;
}

namespace {

// Collective. With every rank on one host, maps a shared block per rank for
// the gradients and moves this rank's gradient buffer into it.
std::unique_ptr<ShmAllreduce> share_gradients(ParameterStore& params, Communicator& comm, const DistributedOptions& o) {
  if (!o.shared_memory || o.wire != WireType::F32 || comm.size() == 1) return nullptr;
  const int64_t bytes = ShmAllreduce::kHeaderBytes + params.padded_numel() * static_cast<int64_t>(sizeof(float));
  std::shared_ptr<SharedMemory> mem = comm.allocate_shared(bytes);
  if (!mem) return nullptr;
  auto shm = std::make_unique<ShmAllreduce>(mem, comm.rank());
  auto alloc = std::make_shared<BorrowedAllocator>(shm->data(comm.rank()),
                                                   static_cast<size_t>(params.padded_numel()) * sizeof(float), mem);
  params.rebind_grads(Tensor::zeros(Shape{params.padded_numel()}, DType::F32, alloc));
  return shm;
}

}  // namespace

DistributedOptimizer::DistributedOptimizer(Optimizer& opt, ParameterStore& params, Communicator& comm,
                                           DistributedOptions options)
    : opt_(opt), params_(params), comm_(comm), options_(options) {
  LS_CHECK_INPUT(options.max_grad_norm >= 0.f && std::isfinite(options.max_grad_norm),
                 "--clip-grad-norm {}: must be a finite number >= 0", options.max_grad_norm);
  std::vector<Bucket> plan = plan_buckets(params, options.bucket_bytes, options.first_bucket_bytes);
  if (params.device().is_cuda()) {
    LS_CHECK(options.gpu != nullptr, "DistributedOptimizer: parameters on {} but no device context",
             params.device().str());
#ifdef LOCKSTEP_HAVE_CUDA
    // On the GPU the clip factor is computed on the device, by the loss scaler's rule.
    LS_CHECK(options.max_grad_norm == 0.f ||
                 (options.loss_scaler && options.loss_scaler->config().max_grad_norm == options.max_grad_norm),
             "DistributedOptimizer: clipping on the GPU needs a LossScaler configured with max_grad_norm {}",
             options.max_grad_norm);
#endif
    gpu_reducer_ = std::make_unique<GpuGradReducer>(
        *options.gpu, comm, options.nccl, params.grads(), std::move(plan),
        GpuGradReducer::Options{options.overlap, options.average, options.wire, options.timeout_s,
                                options.timeline, options.tracker});
    return;
  }
  shm_ = share_gradients(params, comm, options);
  reducer_ = std::make_unique<BucketReducer>(
      comm, params.grads(), std::move(plan),
      BucketReducer::Options{options.overlap, options.wire, options.timeline, shm_.get(), options.tracker});
}

void DistributedOptimizer::begin_backward(bool last) {
  if (gpu_reducer_) {
    if (last) gpu_reducer_->arm();
    return;
  }
  reducer_->quiesce();
  if (last) reducer_->arm();
}

void DistributedOptimizer::on_gradients_ready(int64_t end) {
  if (gpu_reducer_)
    gpu_reducer_->ready(end);
  else
    reducer_->ready(end);
}

void DistributedOptimizer::drain() {
  if (gpu_reducer_) gpu_reducer_->drain();
}

void DistributedOptimizer::broadcast_state(int root) {
  CollectiveScope scope(options_.tracker, CollectiveKind::StateBroadcast);
  broadcast_via_host(comm_, params_.values(), root);
  for (auto& [name, t] : opt_.state()) broadcast_via_host(comm_, *t, root);
  Tensor steps = Tensor::zeros(Shape{1}, DType::I64);
  steps.data<int64_t>()[0] = opt_.steps();
  comm_.broadcast(steps, root);
  opt_.set_steps(steps.data<int64_t>()[0]);
}

void DistributedOptimizer::step(float lr) {
  float scale = options_.average ? 1.f / static_cast<float>(comm_.size()) : 1.f;
  if (gpu_reducer_) {
    gpu_reducer_->finish();
    scale = gpu_reducer_->grad_scale();
#ifdef LOCKSTEP_HAVE_CUDA
    if (options_.loss_scaler) {  // the inf/NaN check and the rule, on the compute stream after the average
      const OptimizerConfig& c = opt_.config();
      const bool adam = c.name != "sgd";
      options_.loss_scaler->step(params_.grads().data<float>(), params_.padded_numel(), lr, scale,
                                 adam ? c.beta1 : 0.f, adam ? c.beta2 : 0.f);
    }
#endif
  } else {
    reducer_->finish();
    if (options_.max_grad_norm > 0.f) {  // the same sum on every rank: no collective
      const auto n0 = Timeline::Clock::now();
      const double sumsq = sum_of_squares_cpu(params_.grads().data<float>(), params_.padded_numel());
      if (options_.timeline)
        options_.timeline->span("gradient norm", "optimizer", Timeline::kCompute, n0, Timeline::Clock::now());
      last_grad_norm_ = static_cast<float>(std::sqrt(sumsq) * static_cast<double>(scale));
      const float coef = clip_coefficient(last_grad_norm_, options_.max_grad_norm);
      if (coef < 1.f) {
        scale *= coef;
        ++clipped_steps_;
      }
    }
  }
  const auto t0 = Timeline::Clock::now();
  opt_.step(lr, scale);
  if (options_.timeline)
    options_.timeline->span("optimizer step", "optimizer", Timeline::kCompute, t0, Timeline::Clock::now());
}

std::string DistributedOptimizer::describe() const {
  std::string sizes;
  const auto& buckets = this->buckets();
  for (size_t i = 0; i < buckets.size() && i < 8; ++i)
    sizes += fmt::format("{}{:.2f}", i ? ", " : "", static_cast<double>(buckets[i].numel()) * 4 / 1e6);
  if (buckets.size() > 8) sizes += ", ...";
  const char* wire = options_.wire == WireType::F32 ? "fp32" : options_.wire == WireType::F16 ? "fp16" : "bf16";
  return fmt::format("{} gradients over {} rank{} ({}); {} bucket{} of {} MB in backward order; {} on the wire; {}",
                     options_.average ? "averaging" : "summing", comm_.size(), comm_.size() == 1 ? "" : "s",
                     gpu_reducer_ ? gpu_reducer_->transport()
                                  : shm_ ? comm_.backend() + ", shared memory" : comm_.backend(),
                     buckets.size(), buckets.size() == 1 ? "" : "s", sizes, wire,
                     (gpu_reducer_ ? gpu_reducer_->overlapping() : reducer_->overlapping())
                         ? "overlapped with backward"
                         : "reduced after backward");
}

}  // namespace lockstep
