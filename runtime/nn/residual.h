// Residual: y = ReLU(branch(x) + shortcut(x)), the building block of ResNets,
// or with Join::Add y = branch(x) + shortcut(x), a transformer's pre-norm
// residual (x + attention(ln(x))). The branch and the (optional) shortcut are
// Sequentials of ordinary layers; no shortcut means the identity. Parameters are named
// "<prefix>branch.<i>.<name>" and "<prefix>shortcut.<i>.<name>".
//
// Forward runs the shortcut, then the branch; backward the branch, then the
// shortcut (the reverse: nn/activation_arena.h places the shortcut's
// activations before the branch's, so the branch's are dead by the time the
// shortcut's backward runs). Backward: dy is masked by the final ReLU in
// place (it is the caller's gradient buffer), handed to both chains' output
// gradients, and the input gradients of the two paths are added. Memory: the
// chains' activations, their gradients and a projection shortcut's input
// gradient live in the model's ActivationArena (plan_memory); a block run on
// its own, outside a planned model, plans each chain apart.
//
// On the CPU, when the branch ends in a BatchNorm2d (as every ResNet block's
// does), the join is fused: the shortcut runs first, then the branch up to
// that batch norm, which writes max(0, bn(z) + shortcut) straight into y while
// z is still in cache; the branch's own output is neither written nor read
// back, nor allocated (the block's output stands in for it). Backward hands
// dy itself to the branch, whose last batch norm applies the join's ReLU mask
// in its first pass (no masking pass, no copy into the branch's buffer); the
// shortcut then takes the masked dy as in the unfused order. The same bits as that order, with two fewer passes over an
// activation-sized array in each direction.

#pragma once

#include "nn/module.h"
#include "nn/sequential.h"

namespace lockstep {

class Residual final : public Module {
 public:
  enum class Join { AddRelu, Add };
  // `name` is how describe() starts ("BasicBlock(16, 32, stride=2)").
  Residual(std::string name, Sequential branch, Sequential shortcut = Sequential(), Join join = Join::AddRelu);
  std::string describe() const override { return name_; }
  Shape output_shape(const Shape& in) const override;
  void declare(ParameterStore& store, const std::string& prefix) override;
  void declare_buffers(ParameterStore& buffers, const std::string& prefix) override;
  void init(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) override;
  bool backward_reads_output() const override { return join_ == Join::AddRelu; }  // the ReLU's mask
  bool has_parameters() const override { return !parameters().empty(); }
  std::vector<const Parameter*> parameters() const override;
  int64_t forward_flops(const Shape& in) const override;
  int64_t forward_traffic(const Shape& in) const override;
  // Both chains take the layout; their input is already in it.
  void set_conv_algorithm(ops::ConvAlgo algo) override {
    branch_.set_conv_algorithm(algo);
    shortcut_.set_conv_algorithm(algo);
  }
  void set_layout(Layout layout) override {
    branch_.set_layout(layout, /*convert_input=*/false);
    shortcut_.set_layout(layout, /*convert_input=*/false);
  }
  void share_scratch(const std::shared_ptr<SharedScratch>& scratch) override;
  // The shortcut's activations, then the branch's; the shortcut's input
  // gradient is taken above the shortcut's in backward.
  void plan_memory(const std::shared_ptr<ActivationArena>& arena, const Shape& input, Device device, DType dtype,
                   cuda::Context* gpu) override;
  void rehearse_backward(ActivationArena& arena, bool input_grad) const override;
  HeldMemory held_memory() const override;  // the branch's and the shortcut's

  Sequential& branch() { return branch_; }
  Sequential& shortcut() { return shortcut_; }

 private:
  Join join_;
  std::string name_;
  Sequential branch_, shortcut_;  // shortcut_ empty: identity
  // The join is fused (the branch ends in a batch norm): the branch's last
  // output is the block's; so is a projection shortcut's that may be overwritten.
  bool joins() const;
  bool shortcut_into_output() const { return joins() && shortcut_.size() && shortcut_.output_overwritable(); }

  std::shared_ptr<ActivationArena> arena_;  // the model's, once planned in it; null for a block on its own
  int64_t shortcut_end_ = 0;      // arena mark after the shortcut's activations (its gradient's boundary)
  int64_t input_capacity_ = 0;    // input elements planned for
  Tensor own_shortcut_grad_;      // the shortcut's input gradient of a block on its own
  bool joined_ = false;           // the last forward fused the join
};

}  // namespace lockstep
