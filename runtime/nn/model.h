// Model: a network, the store that owns its parameters, and what it expects
// as input. Built once (declare -> finalize -> init) and never moved, because
// layers hold pointers into the store.
#pragma once

#include <memory>
#include <string>

#include "nn/sequential.h"

namespace lockstep {

class Model {
 public:
  // Takes the network, declares and lays out its parameters, initialises them
  // from `seed` (the same seed gives the same weights on every rank).
  Model(std::string name, Sequential net, Shape sample_shape, int64_t num_classes, uint64_t seed);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::string& name() const { return name_; }
  const Shape& sample_shape() const { return sample_shape_; }  // [C, H, W]
  int64_t num_classes() const { return num_classes_; }
  Sequential& net() { return net_; }
  const Sequential& net() const { return net_; }
  ParameterStore& params() { return params_; }
  const ParameterStore& params() const { return params_; }
  Shape batch_shape(int64_t batch) const;  // [batch, C, H, W]
  std::string summary() const;             // one line per layer with output shapes

 private:
  std::string name_;
  Sequential net_;
  Shape sample_shape_;
  int64_t num_classes_;
  ParameterStore params_;
};

}  // namespace lockstep
