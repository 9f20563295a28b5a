// ParameterStore: every trainable parameter lives in one flat buffer and its
// gradient in another of the same layout. Parameters are declared in forward
// order and laid out in *reverse*: the last layer's parameters sit at offset 0,
// so during backward gradients become final front-to-back in the flat buffer.
// That makes any prefix-closed slice a ready-to-send bucket with no copies, and
// lets optimizers update all parameters in one pass over memory.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace lockstep {

struct Parameter {
  std::string name;     // "layers.0.weight"
  Shape shape;
  int64_t offset = 0;   // element offset in the flat buffers
  bool decay = true;    // weight decay applies (false for biases if the optimizer asks)
  Tensor value;         // view into ParameterStore::values()
  Tensor grad;          // view into ParameterStore::grads()
  int64_t numel() const { return shape.numel(); }
};

class ParameterStore {
 public:
  // Each parameter starts at a multiple of this many elements (64 bytes of fp32),
  // so kernels see aligned rows. Padding elements stay zero forever.
  static constexpr int64_t kAlignElements = 16;

  // Declare a parameter (before finalize). The pointer stays valid for the
  // store's lifetime; its tensors are bound by finalize().
  Parameter* declare(std::string name, const Shape& shape, bool decay = true);
  void finalize(std::shared_ptr<Allocator> allocator = cpu_allocator());
  // Moves the gradients into `buffer` ([padded_numel] F32, e.g. memory shared
  // with other processes) and rebinds every parameter's gradient view to it.
  void rebind_grads(Tensor buffer);
  // The same for the values (ZeRO-1 shares them between the ranks of a host).
  void rebind_values(Tensor buffer);
  // Moves values and gradients into memory from `allocator` (onto a GPU, or
  // back), rebinding every parameter's views. Off the hot path (synchronous).
  void to(const std::shared_ptr<Allocator>& allocator);
  Device device() const { return values_.defined() ? values_.device() : Device::cpu(); }
  bool finalized() const { return finalized_; }

  // All parameters in declaration (forward) order.
  const std::deque<Parameter>& params() const { return params_; }
  std::deque<Parameter>& params() { return params_; }
  const Parameter* find(const std::string& name) const;

  Tensor& values() { return values_; }  // [padded_numel] fp32
  Tensor& grads() { return grads_; }    // [padded_numel] fp32
  const Tensor& values() const { return values_; }
  const Tensor& grads() const { return grads_; }
  int64_t padded_numel() const { return padded_numel_; }
  int64_t numel() const;  // sum of parameter sizes, without padding

 private:
  std::deque<Parameter> params_;
  Tensor values_;
  Tensor grads_;
  int64_t padded_numel_ = 0;
  bool finalized_ = false;
};

}  // namespace lockstep
