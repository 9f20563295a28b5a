// Sequential: a chain of modules with the activation and gradient memory they
// need, allocated once for the largest batch seen and reused every step.
//
// Memory lives on the input's device (a GPU's through the context's caching
// allocator). Memory plan for a chain of L layers at batch B:
//   acts[i]   output of layer i; View modules (Flatten) always share their
//             input's memory, InPlace modules (ReLU, Dropout) do when no earlier
//             backward needs the values they would overwrite, and a ReLU after a
//             Conv2d/Linear is fused into it (computed in that layer's epilogue,
//             its mask applied in that layer's backward; the ReLU itself never runs)
//   every activation that owns memory, this chain's and its nested chains',
//             lives in one ActivationArena (nn/activation_arena.h) in forward
//             order; the model's outermost chain owns it and plans it for
//             everything nested (Module::plan_memory), except the memory its
//             own output lives in (the logits, read after backward: the last
//             layer's, or the one a trailing view/in-place/fused layer
//             shares), which it keeps apart
//   dL/d(activation) buffers are taken from the arena during backward: at
//             layer k, at or above the end of layer k's nested region, in the
//             memory of activations whose backward is done
// A chain whose last layer's work its caller runs (forward_but_last: a residual
// block's fused join), or whose last layer writes into its caller's memory
// (forward_into: a block's shortcut), allocates nothing for that layer's output.
// Backward walks layers L-1..0 and calls the grad-ready hook after each layer
// with parameters, the moment that layer's parameter gradients are final.
// Forward calls the parameter-wait hook before each layer with parameters
// (ZeRO-1's allgather may still be bringing them in).
//
// Activations and their gradients have the input's element type: fp32, or
// bf16 / fp16 for mixed precision on a GPU; int32 token inputs (an Embedding
// first: the tokens have no gradient) give activations of the compute type. set_compute_dtype(BF16 or F16)
// makes a Sequential round an fp32 GPU input to that type once before its
// first layer (the model's entry point; nested Sequentials then see the 16-bit
// type and follow it).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "nn/activation_arena.h"
#include "nn/module.h"
#include "nn/shared_scratch.h"

namespace lockstep {

class Sequential {
 public:
  // Called during backward each time more gradients are final: every element
  // of the flat gradient buffer below `ready_end` is final (the store lays
  // parameters out in reverse, so this prefix only grows).
  using GradReadyHook = std::function<void(int64_t ready_end)>;
  // Called during forward before each layer with parameters, with the lowest
  // flat offset of its parameters: it returns once every parameter at or
  // above that offset may be read (the layers after it sit below it).
  using ParameterWaitHook = std::function<void(int64_t from)>;
  enum class Phase { Forward, Backward };
  using Clock = std::chrono::steady_clock;
  // Called after each layer's forward/backward with its start and end times
  // (for per-layer profiles and timelines); unset costs one branch per layer.
  using LayerObserver = std::function<void(size_t layer, Phase phase, Clock::time_point begin, Clock::time_point end)>;

  void add(std::unique_ptr<Module> m);
  size_t size() const { return layers_.size(); }
  Module& layer(size_t i) { return *layers_[i]; }
  const Module& layer(size_t i) const { return *layers_[i]; }

  // Parameters are named "<prefix><index>.<name>", index as in PyTorch's nn.Sequential.
  void declare(ParameterStore& store, const std::string& prefix = "layers.");
  void declare_buffers(ParameterStore& buffers, const std::string& prefix = "layers.");
  void init(Rng& rng);
  // Every layer's parameters, in layer order.
  std::vector<const Parameter*> parameters() const;

  // Shape after every layer, for input shape `in` (batch first).
  std::vector<Shape> shapes(const Shape& in) const;
  int64_t forward_flops(const Shape& in) const;    // for a batch of in[0] samples
  int64_t forward_traffic(const Shape& in) const;  // Module::forward_traffic summed over the layers

  // Runs every layer; returns the last activation (e.g. logits [B, classes]).
  // `x` is never modified and must stay alive until backward() returns.
  const Tensor& forward(const Tensor& x, const ForwardContext& ctx);
  // Every layer but the last; returns the last layer's input. The caller runs
  // that layer's work itself (Residual's fused join) and writes its result into
  // `output` (shaped like the chain's output), which stands as the last
  // activation from then on (backward hands it to the last layer as y), so
  // the chain holds no memory for it.
  const Tensor& forward_but_last(const Tensor& x, const ForwardContext& ctx, const Tensor& output);
  // Every layer, the last writing into `output` (shaped like the chain's
  // output) instead of memory of the chain's own; `output` then stands as the
  // last activation. For a caller that overwrites it afterwards (Residual: the
  // shortcut's result is the join's residual, joined in place), so only where
  // output_overwritable() says the layers never read it again.
  const Tensor& forward_into(const Tensor& x, const ForwardContext& ctx, const Tensor& output);
  // The last layer computes its output itself (not a ReLU that may be fused
  // into the layer before, nor a view or in-place layer) and its backward does
  // not read it: the chain's output may be overwritten after forward.
  bool output_overwritable() const;
  // Where the loss writes dL/d(output): shaped like the last forward's output.
  // Not after forward_but_last or forward_into: the caller, who holds the
  // output, passes its gradient to backward() too.
  Tensor output_grad();
  // Backward through every layer. The gradient of the input is written to
  // `input_grad` (shaped like the last forward's input) when given, otherwise
  // not computed.
  // `output_grad`, when given, is dL/d(output) in the caller's memory, used
  // instead of the buffer output_grad() returns (the last layer may modify
  // it, as any layer may its dy).
  void backward(const BackwardContext& ctx, Tensor* input_grad = nullptr, const Tensor* output_grad = nullptr);

  void set_grad_ready_hook(GradReadyHook hook) { hook_ = std::move(hook); }
  // Set after the parameters are declared: each layer's lowest offset is found once, here.
  void set_parameter_wait_hook(ParameterWaitHook hook);
  void set_layer_observer(LayerObserver observer) { observer_ = std::move(observer); }
  // Let a Conv2d/Linear apply a following ReLU in its own epilogue (default on;
  // takes effect at the next allocation).
  void set_fusion(bool on) {
    fusion_ = on;
    capacity_shape_ = Shape();
  }
  // BF16 / F16: an fp32 input on a GPU is rounded to that type before the first
  // layer, so every activation, gradient and layer computation downstream is in
  // it (mixed precision; parameters stay fp32). F32 (default): the input's type
  // is used as it is. Host inputs are never converted (the CPU ops are fp32 only).
  void set_compute_dtype(DType dtype);
  DType compute_dtype() const { return compute_dtype_; }
  // The memory order of 4-D activations (tensor/layout.h), told to every layer
  // (shapes stay logical [N, C, H, W]). With NHWC and `convert_input`, a 4-D
  // input -- always given in NCHW -- is reordered before the first layer (after
  // the compute-type cast) and its gradient reordered back, so callers see
  // NCHW either way. A residual block's chains get their input already in the
  // layout and pass false.
  void set_layout(Layout layout, bool convert_input = true);
  Layout layout() const { return layout_; }
  // Tells every module (ops/conv/conv2d_cpu.h ConvAlgo; Auto unless set).
  void set_conv_algorithm(ops::ConvAlgo algo);
  // Effective aliasing per layer after planning (for tests and logs).
  const std::vector<Aliasing>& planned_aliasing() const { return aliasing_; }
  // Use `scratch` (the CPU convolutions' per-thread buffers) and pass it on to
  // the layers. Without this call a chain makes its own (the model's
  // outermost chain).
  void share_scratch(const std::shared_ptr<SharedScratch>& scratch);
  const std::shared_ptr<SharedScratch>& scratch() const { return scratch_; }
  // Called by the module that contains this chain as its own memory is
  // planned (Module::plan_memory): place this chain's activations, and its
  // layers', in `arena` for inputs up to `in` on `device` in `dtype`.
  // `external_last`: the caller will run forward_but_last or forward_into
  // (the last output is the caller's memory). A forward that does not fit
  // the plan (a larger batch, another entry point) makes the chain plan
  // memory of its own from then on.
  void plan_in(const std::shared_ptr<ActivationArena>& arena, const Shape& in, Device device, DType dtype,
               cuda::Context* gpu, bool external_last);
  // What backward() takes from the arena, in its order, held and released
  // without memory (Module::rehearse_backward): `output_grad_given` as
  // backward's output_grad argument (else output_grad() is taken), and
  // whether an input gradient is asked for.
  void rehearse_backward(ActivationArena& arena, bool output_grad_given, bool input_grad) const;
  // The arena this chain's activations and gradients live in (its own, or the
  // one its caller planned it in); null before the first forward.
  const std::shared_ptr<ActivationArena>& arena() const { return arena_; }
  // Bytes of the activations this chain owns (not counting nested chains or
  // the shared scratch), for the current plan; 0 before the first forward.
  int64_t activation_bytes() const;
  // What the chain and its layers hold between steps (module.h HeldMemory),
  // not counting the shared scratch (the model counts that once). The chain
  // that owns its arena adds the arena's headroom (activation_gradients).
  HeldMemory held_memory() const;

 private:
  // forward() running the first `count` layers (binding every activation).
  // `last_output`: forward_but_last's external output (count is then size() - 1)
  // or forward_into's (count is size()).
  const Tensor& run_forward(const Tensor& x, const ForwardContext& ctx, size_t count, const Tensor* last_output);
  // Plans this chain as its arena's owner: a new plan, placed, committed.
  void allocate(const Shape& in, Device device, DType dtype, cuda::Context* gpu);
  // Decides aliasing and places the activations (and the layers' nested ones).
  void place(const Shape& in, Device device, DType dtype, cuda::Context* gpu);
  void bind_storage();  // act_storage_ as views of the arena's current block
  void bind(const Shape& in);

  std::vector<std::unique_ptr<Module>> layers_;
  std::vector<Aliasing> aliasing_;   // per layer, decided by allocate()
  std::vector<Tensor> act_storage_;  // owned output memory of non-aliased layers, capacity rows
  std::vector<int64_t> act_offset_;  // per layer: its output's offset in the arena, -1 if none there
  std::vector<int64_t> cap_numel_;   // per layer: output elements at capacity
  std::vector<int64_t> fwd_end_;     // per layer: arena mark after it and its nested chains (backward boundary)
  std::vector<Shape> shapes_;        // output shape per layer for the current batch
  std::vector<Tensor> acts_;         // outputs for the current batch (views)
  std::shared_ptr<SharedScratch> scratch_;
  std::shared_ptr<ActivationArena> arena_;
  bool planned_by_parent_ = false;   // arena_ is the caller's (plan_in), not this chain's own
  uint64_t storage_generation_ = 0;  // arena_->generation() the views were made for
  bool storage_bound_ = false;       // act_storage_ views match the plan
  Tensor out_grad_;                  // output_grad()'s arena memory, capacity elements, while held
  int64_t out_grad_handle_ = -1;
  bool external_last_ = false;       // the plan leaves the last activation to the caller
  Shape capacity_shape_;             // input shape the storage was sized for
  Device capacity_device_;           // where the storage lives (the input's device)
  DType capacity_dtype_ = DType::F32;  // the activations' element type
  DType compute_dtype_ = DType::F32;   // see set_compute_dtype
  Tensor input_;                     // the current forward's input (not owned; after the cast, ours)
  Tensor caller_input_;              // with a cast: the caller's fp32 input
  Tensor cast_buf_, cast_grad_buf_;  // with a cast: the 16-bit input and its gradient, capacity elements
  Layout layout_ = Layout::NCHW;
  bool convert_input_ = true;        // see set_layout
  bool reordered_ = false;           // the current forward's input was reordered into layout_
  Tensor layout_buf_, layout_grad_buf_;  // with a reorder: the input and its gradient in layout_, capacity elements
  GradReadyHook hook_;
  ParameterWaitHook wait_hook_;
  std::vector<int64_t> wait_from_;  // per layer: its parameters' lowest offset, -1 without parameters
  LayerObserver observer_;
  bool fusion_ = true;
};

}  // namespace lockstep
