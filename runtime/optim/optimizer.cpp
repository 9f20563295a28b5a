// Optimizer base: splits the flat buffer into as few ranges as the decay
// settings allow (one, normally), then calls the concrete update per range.
#include "optim/optimizer.h"

#include <algorithm>
#include <memory>

#include "ops/memory/memory.h"
#include "optim/adam.h"
#include "optim/sgd.h"

namespace lockstep {

Optimizer::Optimizer(ParameterStore& params, const OptimizerConfig& config) : params_(params), config_(config) {
  LS_CHECK(params.finalized(), "optimizer created before the parameter store was finalised");
  // Parameters sit in reverse declaration order; walk by offset and merge runs.
  std::vector<const Parameter*> by_offset;
  for (const auto& p : params.params()) by_offset.push_back(&p);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 0; i < by_offset.size(); ++i) {
    const bool decay = config_.decay_all || by_offset[i]->decay;
    const int64_t end = i + 1 < by_offset.size() ? by_offset[i + 1]->offset : params.padded_numel();
    if (!ranges_.empty() && ranges_.back().decay == decay)
      ranges_.back().end = end;
    else
      ranges_.push_back({by_offset[i]->offset, end, decay, by_offset[i]->offset});
  }
  state_numel_ = params.padded_numel();
}

int64_t Optimizer::state_bytes() {
  int64_t b = 0;
  for (const auto& slot : state_slots()) b += static_cast<int64_t>(slot.second->nbytes());
  return b;
}

std::vector<std::pair<std::string, Tensor*>> Optimizer::state() {
  std::vector<std::pair<std::string, Tensor*>> slots = state_slots();
  for (auto& [name, t] : slots)
    if (!t->defined()) *t = Tensor::zeros(Shape{state_numel_});
  return slots;
}

void Optimizer::step(float lr, float grad_scale) {
  if (!state_ready_) {
    state();  // allocate on first use
    state_ready_ = true;
  }
  if (short_ranges_) {
    // Many short ranges (a reduction chunk each, at most 2^18 / N elements):
    // the threads take ranges, as they take blocks of one long range.
    const auto n = static_cast<int64_t>(ranges_.size());
#pragma omp parallel for schedule(static) if (params_.padded_numel() > (1 << 18))
    for (int64_t i = 0; i < n; ++i) {
      const Range& r = ranges_[static_cast<size_t>(i)];
      update(r.begin, r.end, r.state_begin, lr, grad_scale, r.decay);
    }
  } else {
    for (const Range& r : ranges_) update(r.begin, r.end, r.state_begin, lr, grad_scale, r.decay);
  }
  ++steps_;
}

void Optimizer::shard(const std::vector<ElementRange>& owned) {
  LS_CHECK(!sharded_, "Optimizer::shard: already sharded");
  LS_CHECK(gpu_ == nullptr, "Optimizer::shard: the state is on a GPU (sharding is host-only)");
  for (size_t i = 0; i < owned.size(); ++i)
    LS_CHECK(owned[i].begin < owned[i].end && owned[i].begin >= 0 && owned[i].end <= params_.padded_numel() &&
                 (i == 0 || owned[i - 1].end <= owned[i].begin),
             "Optimizer::shard: owned ranges must be sorted, disjoint and inside [0, {})", params_.padded_numel());
  // The owned parts of each decay run, with their place in the packed state.
  std::vector<Range> ranges;
  int64_t packed = 0;
  for (const ElementRange& o : owned) {
    for (const Range& r : ranges_) {
      const int64_t b = std::max(o.begin, r.begin), e = std::min(o.end, r.end);
      if (b < e) ranges.push_back({b, e, r.decay, packed + (b - o.begin)});
    }
    packed += o.numel();
  }
  for (auto& [name, t] : state_slots()) {
    if (!t->defined()) continue;  // allocated at the packed size when first used
    Tensor mine = Tensor::zeros(Shape{std::max<int64_t>(packed, 1)});  // never empty: a rank may own nothing
    int64_t at = 0;
    for (const ElementRange& o : owned) {
      std::copy_n(t->data<float>() + o.begin, o.numel(), mine.data<float>() + at);
      at += o.numel();
    }
    *t = std::move(mine);
  }
  ranges_ = std::move(ranges);
  short_ranges_ = ranges_.size() > 1 && std::all_of(ranges_.begin(), ranges_.end(), [](const Range& r) {
                    return r.end - r.begin <= kReduceSegment;
                  });
  owned_ = owned;
  state_numel_ = std::max<int64_t>(packed, 1);
  sharded_ = true;
}

void Optimizer::use_gpu(cuda::Context& gpu) {
  LS_CHECK(!sharded_, "Optimizer::use_gpu: a sharded optimizer stays on the host");
  LS_CHECK(params_.device().is_cuda(), "Optimizer::use_gpu: the parameters are on {}", params_.device().str());
  const std::shared_ptr<Allocator> alloc = ops::allocator_for(params_.device(), ops::Exec{&gpu, "Optimizer"});
  for (auto& [name, t] : state()) *t = t->to(alloc);
  gpu_ = &gpu;
}

void Optimizer::use_device_step(const StepState* state_dev) {
  LS_CHECK(gpu_ != nullptr, "Optimizer::use_device_step: the optimizer is not on a GPU (use_gpu first)");
  loss_scale_ = state_dev;
}

std::unique_ptr<Optimizer> make_optimizer(ParameterStore& params, const OptimizerConfig& config) {
  if (config.name == "sgd") return std::make_unique<Sgd>(params, config);
  if (config.name == "adam" || config.name == "adamw") return std::make_unique<Adam>(params, config);
  LS_INPUT_ERROR("unknown optimizer '{}' (expected sgd, adam or adamw)", config.name);
}

}  // namespace lockstep
