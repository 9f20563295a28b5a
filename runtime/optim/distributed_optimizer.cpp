// DistributedOptimizer: bucket plan, state broadcast, reduce-then-step.
#include "optim/distributed_optimizer.h"

#include <algorithm>
#include <cmath>

#include "core/input_subject.h"
#include "optim/grad_clip.h"
#include "optim/device_step.h"

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

// Elements in the plan's largest bucket (the scratch for state moved a bucket at a time).
int64_t largest_bucket(const std::vector<Bucket>& plan) {
  int64_t largest = 0;
  for (const Bucket& b : plan) largest = std::max(largest, b.numel());
  return largest;
}

// Collective. With every rank on one host: a shared block per rank (a header,
// then [padded_numel] fp32) and a tensor over this rank's; nothing otherwise.
std::pair<std::unique_ptr<ShmAllreduce>, Tensor> shared_blocks(const ParameterStore& params, Communicator& comm) {
  const int64_t bytes = ShmAllreduce::kHeaderBytes + params.padded_numel() * static_cast<int64_t>(sizeof(float));
  std::shared_ptr<SharedMemory> mem = comm.allocate_shared(bytes);
  if (!mem) return {};
  auto shm = std::make_unique<ShmAllreduce>(mem, comm.rank());
  auto alloc = std::make_shared<BorrowedAllocator>(shm->data(comm.rank()),
                                                   static_cast<size_t>(params.padded_numel()) * sizeof(float), mem);
  Tensor mine = Tensor::zeros(Shape{params.padded_numel()}, DType::F32, alloc);
  return {std::move(shm), std::move(mine)};
}

// Collective. Ranks on one host sum the gradients out of each other's blocks:
// this rank's gradient buffer moves into its block.
std::unique_ptr<ShmAllreduce> share_gradients(ParameterStore& params, Communicator& comm, const DistributedOptions& o) {
  if (!o.shared_memory || o.wire != WireType::F32 || comm.size() == 1) return nullptr;
  auto [shm, mine] = shared_blocks(params, comm);
  if (shm) params.rebind_grads(std::move(mine));
  return std::move(shm);
}

// Collective. ZeRO-1 on one host: the parameters move into shared blocks too,
// so the allgather after the update is a copy from the owners' blocks.
std::unique_ptr<ShmAllreduce> share_parameters(ParameterStore& params, Communicator& comm) {
  auto [shm, mine] = shared_blocks(params, comm);
  if (shm) params.rebind_values(std::move(mine));
  return std::move(shm);
}

}  // namespace

DistributedOptimizer::DistributedOptimizer(Optimizer& opt, ParameterStore& params, Communicator& comm,
                                           DistributedOptions options)
    : opt_(opt), params_(params), comm_(comm), options_(options) {
  LS_CHECK_INPUT_ON(options.max_grad_norm >= 0.f && std::isfinite(options.max_grad_norm), subject::kMaxGradNorm,
                    " {}: must be a finite number >= 0", options.max_grad_norm);
  LS_CHECK_INPUT_ON(options.zero_stage == 0 || options.zero_stage == 1, subject::kZeroStage, " {}: expected 0 or 1",
                    options.zero_stage);
  LS_CHECK_INPUT_ON(options.zero_stage == 0 || !params.device().is_cuda(), subject::kZeroStage,
                    " 1: the optimizer state is sharded on the CPU path only, not yet on the GPU");
  std::vector<Bucket> plan = plan_buckets(params, options.bucket_bytes, options.first_bucket_bytes);
  const bool on_gpu = params.device().is_cuda();
  // On the GPU the clip factor is computed on the device, by the device step's rule.
  LS_CHECK(!on_gpu || options.max_grad_norm == 0.f ||
               (options.device_step && options.device_step->config().max_grad_norm == options.max_grad_norm),
           "DistributedOptimizer: clipping on the GPU needs a DeviceStep configured with max_grad_norm {}",
           options.max_grad_norm);
  const bool zero = options.zero_stage == 1;
  if (zero) scatter_state(plan);
  if (!on_gpu) shm_ = share_gradients(params, comm, options);
  if (zero && shm_) param_shm_ = share_parameters(params, comm);
  if (zero)  // the ownership of the reduce-scatter's buckets
    gather_ = std::make_unique<ParameterGather>(
        comm, params.values(), plan,
        ParameterGather::Options{options.overlap && options.gather_during_forward, options.timeline,
                                 options.tracker, param_shm_.get()});
  GradReducerSetup setup;
  setup.grads = params.grads();
  setup.buckets = std::move(plan);
  setup.overlap = options.overlap;
  setup.average = options.average;
  setup.wire = options.wire;
  setup.timeline = options.timeline;
  setup.tracker = options.tracker;
  setup.shm = shm_.get();
  setup.scatter_only = zero;
  setup.gpu = options.gpu;
  setup.nccl = options.nccl;
  setup.timeout_s = options.timeout_s;
  reducer_ = make_grad_reducer(comm, std::move(setup));
}

void DistributedOptimizer::begin_backward(bool last) {
  reducer_->quiesce();
  if (last) reducer_->arm();
}

void DistributedOptimizer::on_gradients_ready(int64_t end) { reducer_->ready(end); }

void DistributedOptimizer::drain() { reducer_->drain(); }

void DistributedOptimizer::broadcast_state(int root) {
  CollectiveScope scope(options_.tracker, CollectiveKind::StateBroadcast);
  LS_CHECK(root == 0 || !opt_.sharded(), "broadcast_state({}): a sharded optimizer's state comes from rank 0", root);
  wait_parameters();
  broadcast_via_host(comm_, params_.values(), root);
  if (!opt_.sharded())
    for (auto& [name, t] : opt_.state()) broadcast_via_host(comm_, *t, root);
  Tensor steps = Tensor::zeros(Shape{1}, DType::I64);
  steps.data<int64_t>()[0] = opt_.steps();
  comm_.broadcast(steps, root);
  opt_.set_steps(steps.data<int64_t>()[0]);
}

void DistributedOptimizer::step(float lr) {
  reducer_->finish();
  float scale = reducer_->grad_scale();
  if (options_.device_step) {  // GPU: the inf/NaN check and the rule, on the compute stream after the average
    const OptimizerConfig& c = opt_.config();
    const bool adam = c.name != "sgd";
    options_.device_step->step(params_.grads().data<float>(), params_.padded_numel(), lr, scale,
                               adam ? c.beta1 : 0.f, adam ? c.beta2 : 0.f);
  } else if (options_.max_grad_norm > 0.f) {  // host: the same sum on every rank, no collective
    const auto n0 = Timeline::Clock::now();
    const double sumsq = opt_.sharded() ? sharded_sum_of_squares()
                                        : sum_of_squares_cpu(params_.grads().data<float>(), params_.padded_numel());
    if (options_.timeline)
      options_.timeline->span("gradient norm", "optimizer", Timeline::kCompute, n0, Timeline::Clock::now());
    last_grad_norm_ = static_cast<float>(std::sqrt(sumsq) * static_cast<double>(scale));
    const float coef = clip_coefficient(last_grad_norm_, options_.max_grad_norm);
    if (coef < 1.f) {
      scale *= coef;
      ++clipped_steps_;
    }
  }
  wait_parameters();  // the last step's gather writes the elements other ranks own
  if (param_shm_) {  // the other ranks have copied this rank's parameters of the last step
    CollectiveScope scope(options_.tracker, CollectiveKind::ParameterGather);
    param_shm_->wait_readers();
  }
  const auto t0 = Timeline::Clock::now();
  opt_.step(lr, scale);
  if (options_.timeline)
    options_.timeline->span("optimizer step", "optimizer", Timeline::kCompute, t0, Timeline::Clock::now());
  if (gather_) {
    gather_->start();
    last_gather_wait_ = gather_->take_wait_seconds();
  }
}

template <typename F>
void DistributedOptimizer::for_each_owned_in(const Bucket& b, F&& f) const {
  int64_t packed = 0;
  for (const ElementRange& o : opt_.owned()) {
    const int64_t lo = std::max(o.begin, b.begin), hi = std::min(o.end, b.end);
    if (lo < hi) f(packed + (lo - o.begin), lo - b.begin, hi - lo);
    packed += o.numel();
  }
}

void DistributedOptimizer::scatter_state(const std::vector<Bucket>& plan) {
  // Rank 0 shards its own state (allocated, e.g. loaded from a checkpoint);
  // the others receive theirs a bucket at a time, so no rank but 0 ever holds
  // the whole state.
  std::vector<std::pair<std::string, Tensor>> whole;
  if (comm_.rank() == 0)
    for (auto& [name, t] : opt_.state()) whole.emplace_back(name, *t);
  opt_.shard(owned_ranges(plan, comm_.rank(), comm_.size()));
  if (comm_.size() == 1) return;
  CollectiveScope scope(options_.tracker, CollectiveKind::StateBroadcast);
  const auto mine = opt_.state();
  Tensor scratch = comm_.rank() == 0 ? Tensor() : Tensor::zeros(Shape{largest_bucket(plan)});
  for (size_t k = 0; k < mine.size(); ++k)
    for (const Bucket& b : plan) {
      Tensor buf = comm_.rank() == 0 ? whole[k].second.slice(b.begin, Shape{b.numel()})
                                     : scratch.slice(0, Shape{b.numel()});
      comm_.broadcast(buf, 0);
      if (comm_.rank() == 0) continue;
      float* state = mine[k].second->data<float>();
      const float* from = buf.data<float>();
      for_each_owned_in(b, [&](int64_t at, int64_t in_bucket, int64_t n) { std::copy_n(from + in_bucket, n, state + at); });
    }
}

double DistributedOptimizer::sharded_sum_of_squares() {
  const float* g = params_.grads().data<float>();
  double mine = 0;
  for (const ElementRange& o : opt_.owned()) mine += sum_of_squares_cpu(g + o.begin, o.numel());
  if (comm_.size() == 1) return mine;
  CollectiveScope scope(options_.tracker, CollectiveKind::GradientNorm);
  Tensor in = Tensor::zeros(Shape{1}, DType::F64), all = Tensor::zeros(Shape{comm_.size()}, DType::F64);
  in.data<double>()[0] = mine;
  comm_.allgather(in, all);
  double sum = 0;
  for (double v : all.span<double>()) sum += v;  // rank order: the same on every rank
  return sum;
}

std::vector<std::pair<std::string, Tensor>> DistributedOptimizer::gather_state(int root) {
  std::vector<std::pair<std::string, Tensor>> out;
  wait_parameters();  // a checkpoint reads the parameters with the state
  const auto state = opt_.state();
  if (!opt_.sharded()) {
    for (auto& [name, t] : state) out.emplace_back(name, *t);
    return out;
  }
  // A bucket at a time: every rank puts its owned parts in, the allgather
  // completes it, rank `root` keeps it.
  CollectiveScope scope(options_.tracker, CollectiveKind::StateGather);
  const std::vector<Bucket>& plan = reducer_->buckets();
  Tensor scratch = Tensor::zeros(Shape{largest_bucket(plan)});
  for (auto& [name, t] : state) {
    Tensor whole = comm_.rank() == root ? Tensor::zeros(Shape{params_.padded_numel()}) : Tensor();
    for (const Bucket& b : plan) {
      Tensor buf = scratch.slice(0, Shape{b.numel()});
      const float* mine = t->data<float>();
      float* to = buf.data<float>();
      for_each_owned_in(b, [&](int64_t at, int64_t in_bucket, int64_t n) { std::copy_n(mine + at, n, to + in_bucket); });
      comm_.allgather_owned(buf);
      if (whole.defined()) std::copy_n(buf.data<float>(), b.numel(), whole.data<float>() + b.begin);
    }
    if (whole.defined()) out.emplace_back(name, std::move(whole));
  }
  return out;
}

std::string DistributedOptimizer::describe() const {
  const auto n_state = static_cast<double>(opt_.state().size());
  auto state_mb = [&](int64_t numel) { return n_state * static_cast<double>(numel) * 4 / 1e6; };
  std::string sizes;
  const auto& buckets = this->buckets();
  for (size_t i = 0; i < buckets.size() && i < 8; ++i)
    sizes += fmt::format("{}{:.2f}", i ? ", " : "", static_cast<double>(buckets[i].numel()) * 4 / 1e6);
  if (buckets.size() > 8) sizes += ", ...";
  const char* wire = options_.wire == WireType::F32 ? "fp32" : options_.wire == WireType::F16 ? "fp16" : "bf16";
  return fmt::format("{} gradients over {} rank{} ({}); {} bucket{} of {} MB in backward order; {} on the wire; {}",
                     options_.average ? "averaging" : "summing", comm_.size(), comm_.size() == 1 ? "" : "s",
                     reducer_->describe(),
                     buckets.size(), buckets.size() == 1 ? "" : "s", sizes, wire,
                     reducer_->overlapping() ? "overlapped with backward"
                         : "reduced after backward") +
         (opt_.sharded() ? fmt::format("; ZeRO-1: optimizer state sharded ({:.1f} of {:.1f} MB here), "
                                       "parameters allgathered after the update{}{}",
                                       state_mb(opt_.state_numel()), state_mb(params_.padded_numel()),
                                       param_shm_ ? " through shared memory" : "",
                                       gather_->overlapping() ? ", overlapped with the next forward" : "")
                         : std::string());
}

}  // namespace lockstep
