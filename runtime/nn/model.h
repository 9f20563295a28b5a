// Model: a network, the stores that own its parameters and buffers, and what
// it expects as input. Built once (declare -> finalize -> init) and never moved, because
// layers hold pointers into the store.
#pragma once

#include <memory>
#include <string>

#include "nn/sequential.h"

namespace lockstep {

struct WeightsLayout;  // checkpoint/weights_layout.h

class Model {
 public:
  // Takes the network, declares and lays out its parameters, initialises them
  // from `seed` (the same seed gives the same weights on every rank).
  Model(std::string name, Sequential net, Shape sample_shape, int64_t num_classes, uint64_t seed);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::string& name() const { return name_; }
  const Shape& sample_shape() const { return sample_shape_; }  // [C, H, W] images, [T] tokens
  int64_t num_classes() const { return num_classes_; }  // classes, or the tokens' vocabulary
  Sequential& net() { return net_; }
  const Sequential& net() const { return net_; }
  ParameterStore& params() { return params_; }
  const ParameterStore& params() const { return params_; }
  // Buffers: state saved with the model but not trained (batch norm's running
  // statistics); flat like the parameters, empty for models without any.
  ParameterStore& buffers() { return buffers_; }
  const ParameterStore& buffers() const { return buffers_; }
  // Everything a weights file or checkpoint holds for the model, as PyTorch's
  // state_dict: the parameters, then the buffers (names are unique across both).
  std::vector<const Parameter*> state() const;
  std::vector<Parameter*> state();
  Shape batch_shape(int64_t batch) const;  // [batch, C, H, W]
  // How weights files name and shape the state, when not as state() does
  // (checkpoint/weights_layout.h); null: as state() does. The model's builder
  // sets it (GPT-2: Hugging Face's names).
  void set_weights_layout(std::shared_ptr<const WeightsLayout> layout) { weights_layout_ = std::move(layout); }
  const WeightsLayout* weights_layout() const { return weights_layout_.get(); }
  // Moves parameters, gradients and buffers to `allocator`'s device (a GPU's
  // caching allocator); layers read them through the stores, so they follow.
  void to(const std::shared_ptr<Allocator>& allocator);
  Device device() const { return params_.device(); }
  std::string summary() const;             // one line per layer with output shapes

  // What the model holds between steps, in bytes: its stores, and what its
  // layers hold (Module::held_memory) with the shared scratch's gradient and
  // convolution buffers, as planned for the largest batch seen so far.
  struct MemoryHeld {
    int64_t parameters = 0, gradients = 0, buffers = 0;
    HeldMemory layers;
    int64_t total() const { return parameters + gradients + buffers + layers.total(); }
  };
  MemoryHeld memory_held() const;

 private:
  std::string name_;
  Sequential net_;
  Shape sample_shape_;
  int64_t num_classes_;
  ParameterStore params_;
  ParameterStore buffers_;
  std::shared_ptr<const WeightsLayout> weights_layout_;
};

}  // namespace lockstep
