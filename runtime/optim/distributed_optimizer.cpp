// DistributedOptimizer: bucket plan, state broadcast, reduce-then-step.
#include "optim/distributed_optimizer.h"

#include <algorithm>

namespace lockstep {

std::vector<Bucket> plan_buckets(const ParameterStore& params, int64_t bucket_bytes) {
  LS_CHECK(bucket_bytes > 0, "bucket size {} must be positive", bucket_bytes);
  // Parameter ranges in buffer order (reverse declaration order = backward order).
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const auto& p : params.params()) ranges.emplace_back(p.offset, p.offset + p.numel());
  std::sort(ranges.begin(), ranges.end());
  std::vector<Bucket> buckets;
  const int64_t cap = std::max<int64_t>(1, bucket_bytes / static_cast<int64_t>(sizeof(float)));
  for (size_t i = 0; i < ranges.size(); ++i) {
    // A parameter's range runs to the next parameter's offset (alignment padding included).
    const int64_t begin = ranges[i].first;
    const int64_t end = i + 1 < ranges.size() ? ranges[i + 1].first : params.padded_numel();
    if (!buckets.empty() && buckets.back().numel() + (end - begin) <= cap)
      buckets.back().end = end;
    else
      buckets.push_back({begin, end});
  }
  return buckets;
}

DistributedOptimizer::DistributedOptimizer(Optimizer& opt, ParameterStore& params, Communicator& comm,
                                           DistributedOptions options)
    : opt_(opt), params_(params), comm_(comm), options_(options),
      buckets_(plan_buckets(params, options.bucket_bytes)) {}

void DistributedOptimizer::broadcast_state(int root) {
  comm_.broadcast(params_.values(), root);
  for (auto& [name, t] : opt_.state()) comm_.broadcast(*t, root);
  Tensor steps = Tensor::zeros(Shape{1}, DType::I64);
  steps.data<int64_t>()[0] = opt_.steps();
  comm_.broadcast(steps, root);
  opt_.set_steps(steps.data<int64_t>()[0]);
}

void DistributedOptimizer::step(float lr) {
  if (comm_.size() > 1) {
    Tensor& grads = params_.grads();
    for (const Bucket& b : buckets_) {
      Tensor slice = grads.slice(b.begin, Shape{b.numel()});
      comm_.allreduce(slice, ReduceOp::Sum);
    }
  }
  const float scale = options_.average ? 1.f / static_cast<float>(comm_.size()) : 1.f;
  opt_.step(lr, scale);
}

std::string DistributedOptimizer::describe() const {
  int64_t largest = 0;
  for (const Bucket& b : buckets_) largest = std::max(largest, b.numel());
  return fmt::format("{} gradients over {} rank{} ({}), {} bucket{} (largest {:.2f} MB)",
                     options_.average ? "averaging" : "summing", comm_.size(), comm_.size() == 1 ? "" : "s",
                     comm_.backend(), buckets_.size(), buckets_.size() == 1 ? "" : "s",
                     static_cast<double>(largest) * 4 / 1e6);
}

}  // namespace lockstep
