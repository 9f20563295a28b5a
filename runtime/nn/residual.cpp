// Residual block: two chains joined by an addition and a ReLU.
#include "nn/residual.h"

#include "nn/activation_arena.h"
#include "nn/batchnorm.h"
#include "ops/elementwise/elementwise.h"
#include "ops/memory/memory.h"

namespace lockstep {

Residual::Residual(std::string name, Sequential branch, Sequential shortcut, Join join)
    : join_(join), name_(std::move(name)), branch_(std::move(branch)), shortcut_(std::move(shortcut)) {
  LS_CHECK(branch_.size() > 0, "{}: the branch has no layers", name_);
  share_scratch(std::make_shared<SharedScratch>());  // until a Sequential gives the model's
}

void Residual::share_scratch(const std::shared_ptr<SharedScratch>& scratch) {
  branch_.share_scratch(scratch);
  shortcut_.share_scratch(scratch);
}

bool Residual::joins() const {
  return join_ == Join::AddRelu && dynamic_cast<const BatchNorm2d*>(&branch_.layer(branch_.size() - 1)) != nullptr;
}

void Residual::plan_memory(const std::shared_ptr<ActivationArena>& arena, const Shape& input, Device device,
                           DType dtype, cuda::Context* gpu) {
  if (shortcut_.size()) shortcut_.plan_in(arena, input, device, dtype, gpu, shortcut_into_output());
  shortcut_end_ = arena->mark();
  branch_.plan_in(arena, input, device, dtype, gpu, joins());
  arena_ = arena;
  input_capacity_ = input.numel();
}

void Residual::rehearse_backward(ActivationArena& arena, bool input_grad) const {
  // As backward(): the branch (joined, it reads the block's dy where it is),
  // then the shortcut, its input gradient held while it runs and is added.
  branch_.rehearse_backward(arena, joins(), input_grad);
  if (!shortcut_.size()) return;
  const int64_t held = input_grad ? arena.hold(input_capacity_, shortcut_end_) : -1;
  shortcut_.rehearse_backward(arena, true, input_grad);
  if (held >= 0) arena.release(held);
}

Shape Residual::output_shape(const Shape& in) const {
  const Shape out = branch_.shapes(in).back();
  const Shape skip = shortcut_.size() ? shortcut_.shapes(in).back() : in;
  LS_CHECK(out == skip, "{}: branch gives {} but the shortcut gives {} for input {}", name_, out.str(), skip.str(),
           in.str());
  return out;
}

void Residual::declare(ParameterStore& store, const std::string& prefix) {
  branch_.declare(store, prefix + "branch.");
  shortcut_.declare(store, prefix + "shortcut.");
}

void Residual::declare_buffers(ParameterStore& buffers, const std::string& prefix) {
  branch_.declare_buffers(buffers, prefix + "branch.");
  shortcut_.declare_buffers(buffers, prefix + "shortcut.");
}

void Residual::init(Rng& rng) {
  branch_.init(rng);
  shortcut_.init(rng);
}

std::vector<const Parameter*> Residual::parameters() const {
  std::vector<const Parameter*> out = branch_.parameters();
  for (const Parameter* p : shortcut_.parameters()) out.push_back(p);
  return out;
}

int64_t Residual::forward_flops(const Shape& in) const {
  const Shape out = output_shape(in);
  return branch_.forward_flops(in) + (shortcut_.size() ? shortcut_.forward_flops(in) : 0) + 2 * out.numel();
}

// The chains, and the join reading the shortcut's value once (the branch's
// last layer can write the sum itself, as the fused join does).
int64_t Residual::forward_traffic(const Shape& in) const {
  const Shape out = output_shape(in);
  return branch_.forward_traffic(in) + (shortcut_.size() ? shortcut_.forward_traffic(in) : 0) + out.numel();
}

HeldMemory Residual::held_memory() const {
  HeldMemory h = branch_.held_memory();
  h += shortcut_.held_memory();
  return h;
}

void Residual::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  joined_ = joins();
  if (joined_) {
    // A projection shortcut writes straight into y, joined there in place:
    // no memory of its own for its output, which nothing reads again.
    const Tensor& b = shortcut_into_output() ? shortcut_.forward_into(x, ctx, y)
                      : shortcut_.size()     ? shortcut_.forward(x, ctx)
                                             : x;
    const Tensor& z = branch_.forward_but_last(x, ctx, y);
    static_cast<BatchNorm2d&>(branch_.layer(branch_.size() - 1)).forward_add_relu(z, b, y, ctx);
    return;
  }
  const Tensor& b = shortcut_.size() ? shortcut_.forward(x, ctx) : x;
  const Tensor& a = branch_.forward(x, ctx);
  const ops::Exec ex{ctx.gpu, "Residual"};
  if (join_ == Join::AddRelu) {
    ops::add_relu(a, b, y, ex);
  } else {
    ops::copy_same_device(y, a, ex);
    ops::add_inplace(b, y, ex);
  }
}

void Residual::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  // dL/d(sum) = dy where y > 0: masked in place, dy is the caller's scratch buffer.
  Tensor g = dy;
  const ops::Exec ex{ctx.gpu, "Residual"};
  if (joined_) {
    // The branch reads g where it is; its last batch norm applies the mask in
    // its first pass (BatchNorm2d::forward_add_relu), so g is masked after this.
    branch_.backward(ctx, dx, &g);
  } else {
    if (join_ == Join::AddRelu) ops::relu_backward(y, g, g, ex);
    Tensor gb = branch_.output_grad();
    ops::copy_same_device(gb, g, ex);
    branch_.backward(ctx, dx);
  }
  if (shortcut_.size()) {
    // The shortcut reads g where it is (nothing reads g after it, so its last
    // layer may change it): no copy, and no output-sized buffer of its own.
    if (!dx) {
      shortcut_.backward(ctx, nullptr, &g);
      return;
    }
    // Taken above the shortcut's activations: the branch's are dead now.
    int64_t held = -1;
    const bool planned = arena_ && shortcut_.arena() == arena_ && x.numel() <= input_capacity_;
    Tensor sx = planned ? arena_->take(input_capacity_, shortcut_end_, &held)
                        : ops::ensure_scratch(own_shortcut_grad_, x.numel(), x.dtype(), x.device(), ex);
    sx = sx.slice(0, x.shape());
    shortcut_.backward(ctx, &sx, &g);
    ops::add_inplace(sx, *dx, ex);
    if (held >= 0) arena_->release(held);
  } else if (dx) {
    ops::add_inplace(g, *dx, ex);
  }
}

}  // namespace lockstep
