// Sequential: activation planning, forward, backward with grad-ready hooks.
#include "nn/sequential.h"

#include <algorithm>

#include "nn/activation_arena.h"
#include "ops/elementwise/elementwise.h"
#include "ops/layout/layout.h"
#include "ops/memory/memory.h"

namespace lockstep {

void Sequential::add(std::unique_ptr<Module> m) {
  LS_CHECK(m != nullptr, "Sequential::add(nullptr)");
  m->set_layout(layout_);
  layers_.push_back(std::move(m));
  capacity_shape_ = Shape();
}

void Sequential::declare(ParameterStore& store, const std::string& prefix) {
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->declare(store, prefix + std::to_string(i) + ".");
}

void Sequential::declare_buffers(ParameterStore& buffers, const std::string& prefix) {
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->declare_buffers(buffers, prefix + std::to_string(i) + ".");
}

std::vector<const Parameter*> Sequential::parameters() const {
  std::vector<const Parameter*> out;
  for (const auto& l : layers_)
    for (const Parameter* p : l->parameters()) out.push_back(p);
  return out;
}

void Sequential::init(Rng& rng) {
  for (auto& l : layers_) l->init(rng);
}

std::vector<Shape> Sequential::shapes(const Shape& in) const {
  std::vector<Shape> out;
  Shape s = in;
  for (const auto& l : layers_) {
    s = l->output_shape(s);
    out.push_back(s);
  }
  return out;
}

namespace {

// The sum of `count(layer, its input shape)` over the layers, for input `in`.
int64_t sum_over_layers(const std::vector<std::unique_ptr<Module>>& layers, const Shape& in,
                        int64_t (Module::*count)(const Shape&) const) {
  int64_t total = 0;
  Shape s = in;
  for (const auto& l : layers) {
    total += ((*l).*count)(s);
    s = l->output_shape(s);
  }
  return total;
}

}  // namespace

int64_t Sequential::forward_flops(const Shape& in) const {
  return sum_over_layers(layers_, in, &Module::forward_flops);
}

int64_t Sequential::forward_traffic(const Shape& in) const {
  return sum_over_layers(layers_, in, &Module::forward_traffic);
}

void Sequential::set_compute_dtype(DType dtype) {
  LS_CHECK(dtype == DType::F32 || is_16bit_float(dtype), "Sequential: compute type {} (F32, BF16 or F16)",
           dtype_name(dtype));
  compute_dtype_ = dtype;
  capacity_shape_ = Shape();
}

void Sequential::set_layout(Layout layout, bool convert_input) {
  layout_ = layout;
  convert_input_ = convert_input;
  for (auto& l : layers_) l->set_layout(layout);
  capacity_shape_ = Shape();  // aliasing may change (Flatten copies in NHWC)
}

void Sequential::set_conv_algorithm(ops::ConvAlgo algo) {
  for (auto& l : layers_) l->set_conv_algorithm(algo);
}

void Sequential::allocate(const Shape& in, Device device, DType dtype, cuda::Context* gpu) {
  if (planned_by_parent_ || !arena_) arena_ = std::make_shared<ActivationArena>();
  planned_by_parent_ = false;
  if (!scratch_) scratch_ = std::make_shared<SharedScratch>();
  arena_->begin_plan(dtype);
  place(in, device, dtype, gpu);
  // The model's own backward: dL/d(output) through output_grad() (or the
  // caller's, when the output is), no input gradient.
  rehearse_backward(*arena_, external_last_, false);
  arena_->commit(device, gpu);
}

void Sequential::rehearse_backward(ActivationArena& arena, bool output_grad_given, bool input_grad) const {
  // backward()'s takes and releases, in its order.
  int64_t dy = output_grad_given ? -1 : arena.hold(cap_numel_.back(), fwd_end_.back());
  for (size_t k = layers_.size(); k-- > 0;) {
    int64_t dx = dy;
    if (k > 0 && aliasing_[k] == Aliasing::None) dx = arena.hold(cap_numel_[k - 1], fwd_end_[k]);
    if (aliasing_[k] != Aliasing::Fused) layers_[k]->rehearse_backward(arena, k > 0 || input_grad);
    if (dx != dy && dy >= 0) arena.release(dy);
    dy = dx;
  }
  if (dy >= 0) arena.release(dy);
}

void Sequential::plan_in(const std::shared_ptr<ActivationArena>& arena, const Shape& in, Device device, DType dtype,
                         cuda::Context* gpu, bool external_last) {
  LS_CHECK(arena != nullptr && arena->dtype() == dtype, "Sequential::plan_in: no arena, or not one of {}",
           dtype_name(dtype));
  arena_ = arena;
  planned_by_parent_ = true;
  external_last_ = external_last;
  if (!scratch_) scratch_ = std::make_shared<SharedScratch>();
  place(in, device, dtype, gpu);
}

void Sequential::place(const Shape& in, Device device, DType dtype, cuda::Context* gpu) {
  LS_CHECK(!layers_.empty(), "Sequential has no layers");
  const std::vector<Shape> cap_shapes = shapes(in);
  const size_t n = layers_.size();
  aliasing_.assign(n, Aliasing::None);
  act_storage_.assign(n, Tensor());
  act_offset_.assign(n, -1);
  cap_numel_.assign(n, 0);
  fwd_end_.assign(n, 0);
  // A ReLU right after a module that can apply it is fused into that module.
  std::vector<bool> fused(n, false);
  for (size_t i = 0; i + 1 < n; ++i) fused[i + 1] = layers_[i]->fuse_relu(fusion_ && layers_[i + 1]->is_relu());
  layers_.back()->fuse_relu(false);
  for (size_t i = 0; i < n; ++i) {
    const Aliasing want = layers_[i]->aliasing();
    if (fused[i]) {
      aliasing_[i] = Aliasing::Fused;
    } else if (want == Aliasing::View) {
      aliasing_[i] = Aliasing::View;
    } else if (want == Aliasing::InPlace) {
      // Overwriting our input also overwrites every activation it is a view or an
      // in-place result of. Allowed only if none of those layers reads its output
      // in backward and the chain does not reach the caller's input.
      bool safe = true;
      size_t j = i;
      while (true) {
        if (j == 0) { safe = false; break; }  // reaches the caller's input
        --j;
        if (layers_[j]->backward_reads_output()) { safe = false; break; }
        if (aliasing_[j] == Aliasing::None) break;  // j owns the memory
      }
      aliasing_[i] = safe ? Aliasing::InPlace : Aliasing::None;
    }
    cap_numel_[i] = cap_shapes[i].numel();
  }
  // The model's output (the logits) is read after backward, which takes
  // gradients over every activation above its boundaries: the layer whose
  // memory the output is -- the last one, or the one a trailing view,
  // in-place or fused layer shares -- keeps it apart, out of the arena.
  size_t output_owner = n;
  if (!planned_by_parent_ && !external_last_)
    for (size_t i = n; i-- > 0;)
      if (aliasing_[i] == Aliasing::None) {
        output_owner = i;
        break;
      }
  for (size_t i = 0; i < n; ++i) {
    const bool external = external_last_ && i + 1 == n;
    if (aliasing_[i] == Aliasing::None && !external) {
      if (i == output_owner)
        act_storage_[i] = Tensor::zeros(cap_shapes[i], dtype, ops::allocator_for(device, ops::Exec{gpu, "Sequential"}));
      else
        act_offset_[i] = arena_->place(cap_numel_[i]);
    }
    // Then what the layer nests, in the order its forward runs it.
    layers_[i]->share_scratch(scratch_);
    layers_[i]->plan_memory(arena_, i == 0 ? in : cap_shapes[i - 1], device, dtype, gpu);
    fwd_end_[i] = arena_->mark();
  }
  out_grad_ = Tensor();
  out_grad_handle_ = -1;
  storage_bound_ = false;
  // Views of the last forward's memory go now, before the owner commits the
  // new plan: the old block is freed before the new one is made, not held
  // beside it until the next forward rebinds.
  for (Tensor& a : acts_) a = Tensor();
  input_ = Tensor();
  caller_input_ = Tensor();
  capacity_shape_ = in;
  capacity_device_ = device;
  capacity_dtype_ = dtype;
}

void Sequential::bind_storage() {
  const std::vector<Shape> cap_shapes = shapes(capacity_shape_);
  for (size_t i = 0; i < layers_.size(); ++i)
    if (act_offset_[i] >= 0) act_storage_[i] = arena_->storage().slice(act_offset_[i], cap_shapes[i]);
  storage_generation_ = arena_->generation();
  storage_bound_ = true;
}

void Sequential::share_scratch(const std::shared_ptr<SharedScratch>& scratch) {
  LS_CHECK(scratch != nullptr, "Sequential::share_scratch: no scratch");
  if (scratch == scratch_) return;
  scratch_ = scratch;
  capacity_shape_ = Shape();
}

int64_t Sequential::activation_bytes() const {
  int64_t b = 0;
  for (const Tensor& t : act_storage_) b += t.defined() ? static_cast<int64_t>(t.nbytes()) : 0;
  return b;
}

HeldMemory Sequential::held_memory() const {
  HeldMemory h;
  h.activations = activation_bytes() + static_cast<int64_t>(cast_buf_.nbytes() + layout_buf_.nbytes());
  h.activation_gradients = static_cast<int64_t>(cast_grad_buf_.nbytes() + layout_grad_buf_.nbytes());
  for (const auto& layer : layers_) h += layer->held_memory();
  if (arena_ && !planned_by_parent_) h += arena_->held_memory();
  return h;
}

void Sequential::bind(const Shape& in) {
  shapes_ = shapes(in);
  acts_.assign(layers_.size(), Tensor());
  for (size_t i = 0; i < layers_.size(); ++i)
    if (act_storage_[i].defined()) acts_[i] = act_storage_[i].narrow_rows(in[0]).reshape(shapes_[i]);
}

const Tensor& Sequential::forward(const Tensor& x_in, const ForwardContext& ctx) {
  return run_forward(x_in, ctx, layers_.size(), nullptr);
}

const Tensor& Sequential::forward_but_last(const Tensor& x_in, const ForwardContext& ctx, const Tensor& output) {
  LS_CHECK(!layers_.empty(), "Sequential has no layers");
  return run_forward(x_in, ctx, layers_.size() - 1, &output);
}

const Tensor& Sequential::forward_into(const Tensor& x_in, const ForwardContext& ctx, const Tensor& output) {
  LS_CHECK(output_overwritable(), "Sequential::forward_into: the last layer ({}) is fused, aliased or reads its "
                                  "output in backward", layers_.empty() ? "none" : layers_.back()->describe());
  return run_forward(x_in, ctx, layers_.size(), &output);
}

bool Sequential::output_overwritable() const {
  if (layers_.empty()) return false;
  const Module& last = *layers_.back();
  return last.aliasing() == Aliasing::None && !last.is_relu() && !last.backward_reads_output();
}

void Sequential::set_parameter_wait_hook(ParameterWaitHook hook) {
  wait_hook_ = std::move(hook);
  wait_from_.assign(layers_.size(), -1);
  for (size_t i = 0; i < layers_.size(); ++i)
    for (const Parameter* p : layers_[i]->parameters())
      wait_from_[i] = wait_from_[i] < 0 ? p->offset : std::min(wait_from_[i], p->offset);
}

const Tensor& Sequential::run_forward(const Tensor& x_in, const ForwardContext& ctx, size_t count,
                                      const Tensor* last_output) {
  const Shape& in = x_in.shape();
  LS_CHECK(in.rank() >= 1 && in[0] > 0, "Sequential input shape {} has no batch", in.str());
  if ((last_output != nullptr) != external_last_) {  // plan the last activation's memory again
    external_last_ = last_output != nullptr;
    capacity_shape_ = Shape();
  }
  const bool cast = is_16bit_float(compute_dtype_) && x_in.dtype() == DType::F32 && x_in.device().is_cuda();
  // Token inputs (int32, read by an Embedding first) make activations of the
  // compute type: 16-bit on a GPU with mixed precision, else fp32.
  const bool tokens = x_in.dtype() == DType::I32;
  const DType dtype = cast || (tokens && is_16bit_float(compute_dtype_) && x_in.device().is_cuda()) ? compute_dtype_
                      : tokens                                                                     ? DType::F32
                                                                                                   : x_in.dtype();
  bool fits = capacity_shape_.rank() == in.rank() && in[0] <= capacity_shape_[0] &&
              capacity_device_ == x_in.device() && capacity_dtype_ == dtype;
  for (int d = 1; fits && d < in.rank(); ++d) fits = in[d] == capacity_shape_[d];
  if (!fits) allocate(in, x_in.device(), dtype, ctx.gpu);
  if (!planned_by_parent_) arena_->release_all();  // nothing is held across a forward
  out_grad_ = Tensor();
  out_grad_handle_ = -1;
  const bool rebind = !storage_bound_ || storage_generation_ != arena_->generation();
  if (rebind) bind_storage();
  if (rebind || shapes_.empty() || shapes_[0][0] != in[0]) bind(in);
  caller_input_ = Tensor();
  input_ = x_in;
  if (cast) {
    const ops::Exec ex{ctx.gpu, "Sequential"};
    ops::ensure_scratch(cast_buf_, capacity_shape_.numel(), compute_dtype_, x_in.device(), ex);
    input_ = cast_buf_.slice(0, in);
    ops::cast(x_in, input_, ex);
    caller_input_ = x_in;
  }
  reordered_ = layout_ == Layout::NHWC && convert_input_ && in.rank() == 4;
  if (reordered_) {
    ops::ensure_scratch(layout_buf_, capacity_shape_.numel(), dtype, x_in.device(), ops::Exec{ctx.gpu, "Sequential"});
    Tensor t = layout_buf_.slice(0, in);
    ops::reorder_layout(input_, Layout::NCHW, Layout::NHWC, t, ops::Exec{ctx.gpu, "Sequential"});
    input_ = t;
  }
  const Tensor& x = input_;
  const Tensor* cur = &x;
  if (last_output) {
    LS_CHECK(last_output->shape() == shapes_.back() && last_output->dtype() == dtype &&
                 last_output->device() == x_in.device(),
             "Sequential: output {} {} on {} for a chain whose output is {} {} on {}", last_output->shape().str(),
             dtype_name(last_output->dtype()), last_output->device().str(), shapes_.back().str(), dtype_name(dtype),
             x_in.device().str());
    acts_.back() = *last_output;
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    const bool external = last_output && i + 1 == layers_.size();
    if (aliasing_[i] != Aliasing::None && !external) acts_[i] = cur->reshape(shapes_[i]);
    if (i < count && aliasing_[i] != Aliasing::Fused) {
      if (wait_hook_ && i < wait_from_.size() && wait_from_[i] >= 0) wait_hook_(wait_from_[i]);
      const auto t0 = observer_ ? Clock::now() : Clock::time_point();
      layers_[i]->forward(*cur, acts_[i], ctx);
      if (observer_) observer_(i, Phase::Forward, t0, Clock::now());
    }
    cur = &acts_[i];
  }
  return count == 0 ? x : acts_[count - 1];
}

Tensor Sequential::output_grad() {
  LS_CHECK(!acts_.empty(), "output_grad() before forward()");
  LS_CHECK(!external_last_, "output_grad(): the chain's output is its caller's memory, so is its gradient (pass it "
                            "to backward())");
  if (out_grad_handle_ < 0) out_grad_ = arena_->take(cap_numel_.back(), fwd_end_.back(), &out_grad_handle_);
  return out_grad_.slice(0, shapes_.back());
}

void Sequential::backward(const BackwardContext& ctx, Tensor* caller_grad, const Tensor* output_grad) {
  LS_CHECK(!acts_.empty(), "backward() before forward()");
  LS_CHECK(!caller_grad || caller_grad->shape() == input_.shape(), "input gradient {} does not match the input {}",
           caller_grad->shape().str(), input_.shape().str());
  // With an input cast, layer 0's gradient is 16-bit, widened at the end;
  // with a reorder it is in layout_, reordered back to NCHW first.
  Tensor cast_grad, layout_grad;
  Tensor* input_grad = caller_grad;
  if (caller_grad && caller_input_.defined()) {
    ops::ensure_scratch(cast_grad_buf_, capacity_shape_.numel(), input_.dtype(), input_.device(), ops::Exec{ctx.gpu, "Sequential"});
    cast_grad = cast_grad_buf_.slice(0, input_.shape());
    input_grad = &cast_grad;
  }
  Tensor* nchw_grad = input_grad;  // where the NCHW gradient goes
  if (input_grad && reordered_) {
    ops::ensure_scratch(layout_grad_buf_, capacity_shape_.numel(), input_.dtype(), input_.device(), ops::Exec{ctx.gpu, "Sequential"});
    layout_grad = layout_grad_buf_.slice(0, input_.shape());
    input_grad = &layout_grad;
  }
  LS_CHECK(!output_grad || output_grad->shape() == shapes_.back(), "output gradient {} does not match the output {}",
           output_grad->shape().str(), shapes_.back().str());
  LS_CHECK(output_grad || !external_last_, "backward(): the chain's output is its caller's; so is its gradient");
  LS_CHECK(output_grad || out_grad_handle_ >= 0, "backward(): no output gradient (write it into output_grad() first)");
  // dy and dx of layer k are gradients held in the arena (dy_held, dx_held:
  // their handles, -1 for the caller's memory); dx is taken above layer k's
  // nested region, in memory whose backward is done.
  Tensor dy = output_grad ? *output_grad : out_grad_.slice(0, shapes_.back());
  int64_t dy_held = output_grad ? -1 : out_grad_handle_;
  out_grad_ = Tensor();
  out_grad_handle_ = -1;
  for (size_t k = layers_.size(); k-- > 0;) {
    const Tensor& x = k == 0 ? input_ : acts_[k - 1];
    Tensor dx;
    int64_t dx_held = dy_held;  // a view or in-place layer's dx is its dy
    if (k > 0) {
      if (aliasing_[k] == Aliasing::None)
        dx = arena_->take(cap_numel_[k - 1], fwd_end_[k], &dx_held).slice(0, x.shape());
      else
        dx = dy.reshape(x.shape());
    }
    if (aliasing_[k] != Aliasing::Fused) {
      const auto t0 = observer_ ? Clock::now() : Clock::time_point();
      layers_[k]->backward(x, acts_[k], dy, k > 0 ? &dx : input_grad, ctx);
      if (observer_) observer_(k, Phase::Backward, t0, Clock::now());
    }
    // A view as the first layer moves no data: its input gradient is dy itself.
    if (k == 0 && input_grad && aliasing_[0] == Aliasing::View)
      ops::copy_same_device(*input_grad, dy.reshape(input_.shape()), ops::Exec{ctx.gpu, "Sequential"});
    if (hook_ && layers_[k]->has_parameters()) {
      int64_t end = 0;  // end of this layer's parameters, alignment padding included
      for (const Parameter* p : layers_[k]->parameters())
        end = std::max(end, (p->offset + p->numel() + ParameterStore::kAlignElements - 1) /
                                ParameterStore::kAlignElements * ParameterStore::kAlignElements);
      hook_(end);
    }
    if (k > 0 && dx_held != dy_held && dy_held >= 0) arena_->release(dy_held);
    dy = dx;
    dy_held = dx_held;
  }
  if (dy_held >= 0) arena_->release(dy_held);
  if (!planned_by_parent_) arena_->settle();
  if (nchw_grad && reordered_) ops::reorder_layout(layout_grad, Layout::NHWC, Layout::NCHW, *nchw_grad, ops::Exec{ctx.gpu, "Sequential"});
  if (caller_grad && caller_input_.defined()) ops::cast(cast_grad, *caller_grad, ops::Exec{ctx.gpu, "Sequential"});
}

}  // namespace lockstep
