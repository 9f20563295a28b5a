// Optimizer interface: an update is one pass over the flat parameter and
// gradient buffers of a ParameterStore. State tensors (momentum, moments) have
// the same flat layout, so they can be broadcast and checkpointed as a whole.
// Sharded (ZeRO-1, shard()): the optimizer updates only the elements this
// rank owns and keeps state for those alone, packed in buffer order.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "comm/ownership.h"
#include "nn/parameter_store.h"
#include "optim/step_rule.h"

namespace lockstep {

namespace cuda {
class Context;  // cuda/context.h
}

struct OptimizerConfig {
  std::string name = "sgd";  // sgd | adam | adamw
  float momentum = 0.9f;     // sgd
  bool nesterov = false;     // sgd
  float weight_decay = 0.f;  // sgd/adam: L2 added to the gradient; adamw: decoupled
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam/adamw
  bool decay_all = true;     // false: skip parameters declared with decay=false (biases)
};

class Optimizer {
 public:
  explicit Optimizer(ParameterStore& params, const OptimizerConfig& config);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Apply one update with learning rate `lr` from the current gradients times
  // `grad_scale` (the distributed optimizer passes 1/N to average summed
  // gradients inside this same pass over memory).
  void step(float lr, float grad_scale = 1.f);
  int64_t steps() const { return steps_; }
  void set_steps(int64_t s) { steps_ = s; }
  virtual std::string describe() const = 0;
  const std::string& name() const { return config_.name; }
  // Named state tensors ([state_numel()] fp32 each), for broadcast and
  // checkpoints. Allocated (zero) at their first use: a rank whose optimizer
  // is sharded before then never holds the whole state.
  std::vector<std::pair<std::string, Tensor*>> state();
  // How many state tensors it keeps (SGD with momentum 1, Adam 2, plain SGD 0); allocates nothing.
  size_t state_count() { return state_slots().size(); }
  // Bytes the state tensors hold now (0 before their first use); allocates nothing.
  int64_t state_bytes();
  // ZeRO-1: from now on update only the `owned` elements of the flat buffers
  // (sorted, disjoint ranges) and keep only their state: each state tensor
  // becomes [total owned] with the owned elements' current values (zeros if
  // it was never allocated), in buffer order. Host state only; once.
  void shard(const std::vector<ElementRange>& owned);
  bool sharded() const { return sharded_; }
  const std::vector<ElementRange>& owned() const { return owned_; }
  // Elements of each state tensor: padded_numel, or the owned count when sharded.
  int64_t state_numel() const { return state_numel_; }
  // Parameters on a GPU: moves the state tensors to `gpu`'s device; updates
  // then run as one fused kernel per range on its stream (ops/update/update_cuda.h).
  void use_gpu(cuda::Context& gpu);
  // fp16 training (GPU): the update kernels read this device state each step
  // -- skip or apply, the gradient factor, Adam's bias corrections -- in place
  // of the host's scale and step count (optim/step_rule.h). Not owned.
  void use_device_step(const StepState* state_dev);
  const OptimizerConfig& config() const { return config_; }

 protected:
  // The state tensors, not yet allocated before state() is first called.
  virtual std::vector<std::pair<std::string, Tensor*>> state_slots() = 0;
  // Update elements [begin, end) of the flat buffers with gradient = scale * grad;
  // their state starts at element `state_begin` of the state tensors; `decay`
  // tells whether weight decay applies to this range.
  virtual void update(int64_t begin, int64_t end, int64_t state_begin, float lr, float scale, bool decay) = 0;

  ParameterStore& params_;
  OptimizerConfig config_;
  int64_t steps_ = 0;  // updates applied so far (Adam's bias correction uses steps_ + 1)
  cuda::Context* gpu_ = nullptr;  // set by use_gpu()
  const StepState* loss_scale_ = nullptr;  // device memory; set by use_device_step()

 private:
  struct Range {
    int64_t begin, end;
    bool decay;
    int64_t state_begin;
  };
  std::vector<Range> ranges_;  // contiguous runs of the flat buffer with one decay setting (owned ones, if sharded)
  bool sharded_ = false;
  bool short_ranges_ = false;  // sharded into chunks: step() parallel over ranges
  bool state_ready_ = false;   // state() has allocated the state tensors
  std::vector<ElementRange> owned_;  // set by shard()
  int64_t state_numel_ = 0;
};

std::unique_ptr<Optimizer> make_optimizer(ParameterStore& params, const OptimizerConfig& config);

}  // namespace lockstep
