// Residual block: two chains joined by an addition and a ReLU.
#include "nn/residual.h"

#include "ops/elementwise.h"

namespace lockstep {

Residual::Residual(std::string name, Sequential branch, Sequential shortcut)
    : name_(std::move(name)), branch_(std::move(branch)), shortcut_(std::move(shortcut)) {
  LS_CHECK(branch_.size() > 0, "{}: the branch has no layers", name_);
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

void Residual::forward(const Tensor& x, Tensor& y, const ForwardContext& ctx) {
  const Tensor& a = branch_.forward(x, ctx);
  const Tensor& b = shortcut_.size() ? shortcut_.forward(x, ctx) : x;
  ops::add_relu_cpu(y.numel(), a.data<float>(), b.data<float>(), y.data<float>());
}

void Residual::backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor* dx, const BackwardContext& ctx) {
  // dL/d(sum) = dy where y > 0: masked in place, dy is the caller's scratch buffer.
  Tensor g = dy;
  ops::relu_backward_cpu(y.numel(), y.data<float>(), g.data<float>(), g.data<float>());
  Tensor gb = branch_.output_grad();
  gb.copy_from(g);
  branch_.backward(ctx, dx);
  if (shortcut_.size()) {
    Tensor gs = shortcut_.output_grad();
    gs.copy_from(g);
    if (!dx) {
      shortcut_.backward(ctx, nullptr);
      return;
    }
    if (scratch_.numel() < x.numel()) scratch_ = Tensor::zeros(Shape{x.numel()});
    Tensor sx = scratch_.slice(0, x.shape());
    shortcut_.backward(ctx, &sx);
    ops::add_inplace_cpu(dx->numel(), sx.data<float>(), dx->data<float>());
  } else if (dx) {
    ops::add_inplace_cpu(dx->numel(), g.data<float>(), dx->data<float>());
  }
}

}  // namespace lockstep
