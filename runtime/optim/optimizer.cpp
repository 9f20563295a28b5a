// Optimizer base: splits the flat buffer into as few ranges as the decay
// settings allow (one, normally), then calls the concrete update per range.
#include "optim/optimizer.h"

#include <algorithm>
#include <memory>

#include "nn/device_util.h"
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
      ranges_.push_back({by_offset[i]->offset, end, decay});
  }
}

void Optimizer::step(float lr, float grad_scale) {
  for (const Range& r : ranges_) update(r.begin, r.end, lr, grad_scale, r.decay);
  ++steps_;
}

void Optimizer::use_gpu(cuda::Context& gpu) {
  LS_CHECK(params_.device().is_cuda(), "Optimizer::use_gpu: the parameters are on {}", params_.device().str());
  const std::shared_ptr<Allocator> alloc = allocator_for(params_.device(), &gpu, "Optimizer");
  for (auto& [name, t] : state()) *t = t->to(alloc);
  gpu_ = &gpu;
}

void Optimizer::use_loss_scale(const LossScaleState* state_dev) {
  LS_CHECK(gpu_ != nullptr, "Optimizer::use_loss_scale: the optimizer is not on a GPU (use_gpu first)");
  loss_scale_ = state_dev;
}

std::unique_ptr<Optimizer> make_optimizer(ParameterStore& params, const OptimizerConfig& config) {
  if (config.name == "sgd") return std::make_unique<Sgd>(params, config);
  if (config.name == "adam" || config.name == "adamw") return std::make_unique<Adam>(params, config);
  LS_INPUT_ERROR("unknown optimizer '{}' (expected sgd, adam or adamw)", config.name);
}

}  // namespace lockstep
