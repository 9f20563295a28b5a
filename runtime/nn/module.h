// Module: a layer with explicit forward and backward (no autograd tape).
// Shapes include the batch dimension first. A module declares its parameters
// into a ParameterStore and keeps pointers to them; the store owns the memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "nn/parameter_store.h"
#include "ops/batchnorm/stats_reducer.h"
#include "tensor/layout.h"
#include "tensor/tensor.h"

namespace lockstep::ops {
enum class ConvAlgo;  // ops/conv/conv2d_cpu.h
}  // namespace lockstep::ops

namespace lockstep {

namespace cuda {
class Context;  // cuda/context.h: one rank's device, stream, allocator and library handles
}
class SharedScratch;    // nn/shared_scratch.h: a model's per-thread scratch buffers
class ActivationArena;  // nn/activation_arena.h: a model's activations and their gradients

// How a module's output relates to its input's memory.
enum class Aliasing {
  None,     // separate output buffer
  View,     // output is the input reshaped; forward and backward move no data
  InPlace,  // output overwrites the input (when the planner finds that safe)
  Fused,    // (planner only) the previous module computes this one; nothing runs
};

// Memory a module keeps from one step to the next besides its parameters
// (the parameter and buffer stores hold those), in bytes. Containers add
// their layers'; the model's SharedScratch is counted once, by the model.
struct HeldMemory {
  int64_t activations = 0;           // outputs kept for backward; the first layer's cast or reordered input
  int64_t activation_gradients = 0;  // dL/d(activation) buffers
  int64_t scratch = 0;  // per-layer state: pooling argmax, dropout masks, 16-bit weights, batch-norm statistics,
                        // the CPU convolutions' buffers
  HeldMemory& operator+=(const HeldMemory& o) {
    activations += o.activations;
    activation_gradients += o.activation_gradients;
    scratch += o.scratch;
    return *this;
  }
  int64_t total() const { return activations + activation_gradients + scratch; }
};

struct ForwardContext {
  bool training = true;
  // Keys for stochastic layers (dropout): draws depend on the global sample
  // index, so a sample gets the same mask at any world size.
  uint64_t seed = 0;
  int64_t step = 0;           // optimizer step (or evaluation batch)
  int64_t sample_offset = 0;  // global index of this shard's first sample in the batch
  StatsReducer* sync = nullptr;  // batch statistics over all ranks (training only); null: this rank's batch
  // Tensors on a GPU: the rank's device context (stream, allocator, cuBLAS and
  // cuDNN handles); layers queue their kernels on its stream. Null on the CPU.
  cuda::Context* gpu = nullptr;
  // A captured CUDA graph's step counter in device memory (--cuda-graph):
  // stochastic layers read the step there when the kernel runs, not `step`,
  // which the graph would freeze. Null otherwise.
  const int64_t* step_dev = nullptr;
};

struct BackwardContext {
  // false: parameter gradients are overwritten; true: added to (accumulation).
  bool accumulate = false;
  StatsReducer* sync = nullptr;  // as in the forward pass
  cuda::Context* gpu = nullptr;  // as in the forward pass
};

class Module {
 public:
  virtual ~Module() = default;
  virtual std::string describe() const = 0;  // "Conv2d(1, 20, kernel=3)"
  virtual Shape output_shape(const Shape& input) const = 0;

  // Parameters: declared under `prefix` ("layers.3."), then initialised.
  virtual void declare(ParameterStore& store, const std::string& prefix) {}
  // Buffers: state that is not trained but saved with the model (batch norm's
  // running statistics), declared into a second store under the same names.
  virtual void declare_buffers(ParameterStore& buffers, const std::string& prefix) {}
  virtual void init(Rng& rng) {}

  // y = f(x). y is preallocated with output_shape(x.shape()); it may alias x
  // when aliasing() != None and the planner allowed it.
  virtual void forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) = 0;
  // Given dL/dy, write dL/dx into *dx (when dx != nullptr) and write or
  // accumulate the parameter gradients. For View/InPlace modules dx may alias dy,
  // and x may alias y.
  virtual void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx,
                        const BackwardContext& ctx) = 0;

  virtual Aliasing aliasing() const { return Aliasing::None; }
  // A ReLU module says so; a module that can apply a following ReLU itself
  // (in its output epilogue, and the mask in its backward) accepts fusion.
  virtual bool is_relu() const { return false; }
  // fuse_relu(true) asks the module to apply the ReLU itself; returns whether it
  // does. fuse_relu(false) turns fusion off again.
  virtual bool fuse_relu(bool on) { return false; }
  // True when backward() reads y (ReLU does): then the next module may not overwrite it.
  virtual bool backward_reads_output() const { return false; }
  // The memory order (tensor/layout.h) of the 4-D activations this module
  // reads and writes; shapes stay logical [N, C, H, W] either way. Sequential::
  // set_layout tells every module. Modules whose tensors are not 4-D, or that
  // treat every element alike (ReLU, residual additions), ignore it.
  virtual void set_layout(Layout layout) { (void)layout; }
  // The algorithm CPU convolutions use (ops/conv/conv2d_cpu.h: Auto picks per shape).
  // Containers pass it on; modules without convolutions ignore it.
  virtual void set_conv_algorithm(ops::ConvAlgo algo) { (void)algo; }
  // The model's scratch memory (nn/shared_scratch.h), given by the enclosing
  // Sequential as it plans its memory. Modules with scratch of their own use
  // it instead; the rest ignore it.
  virtual void share_scratch(const std::shared_ptr<SharedScratch>& scratch) { (void)scratch; }
  // Called by the enclosing Sequential as it plans its memory, right after
  // placing this module's output: a module that contains chains (a residual
  // block) places their activations in `arena` (Sequential::plan_in), in the
  // order its forward runs them, for inputs up to `input`. A module holding a
  // view of an activation from the last forward drops it (the new plan
  // replaces that memory; batch norm's join output). The rest ignore it.
  virtual void plan_memory(const std::shared_ptr<ActivationArena>& arena, const Shape& input, Device device,
                           DType dtype, cuda::Context* gpu) {
    (void)arena, (void)input, (void)device, (void)dtype, (void)gpu;
  }
  // After planning: hold and release in `arena` the gradients backward() would
  // take from it, in the same order, running nothing (ActivationArena::hold;
  // the owner sizes the arena's headroom so). `input_grad`: backward gets a dx.
  // Modules that contain chains take part; the rest take nothing.
  virtual void rehearse_backward(ActivationArena& arena, bool input_grad) const { (void)arena, (void)input_grad; }
  virtual bool has_parameters() const { return false; }
  virtual std::vector<const Parameter*> parameters() const { return {}; }
  // Forward multiply-adds x2 per sample (for throughput reports); 0 if negligible.
  virtual int64_t forward_flops(const Shape& input) const { return 0; }
  // Activation elements a forward pass over batch `input` must move for this
  // module when layers run one after another: its input read once and its
  // output written once. ReLU and Dropout, which an implementation can fuse
  // into the previous layer's pass, and Flatten, a view, count 0; containers
  // sum their layers. The memory-traffic floor of a training step
  // (nn/traffic_floor.h) is built from it.
  virtual int64_t forward_traffic(const Shape& input) const { return input.numel() + output_shape(input).numel(); }
  // What this module holds between steps (see HeldMemory); nothing by default.
  virtual HeldMemory held_memory() const { return {}; }
};

}  // namespace lockstep
