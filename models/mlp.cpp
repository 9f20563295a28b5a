// mlp: Flatten, Linear(784, 256), ReLU, Linear(256, 10) for 28x28 inputs.
#include "nn/layers.h"
#include "registry.h"

namespace lockstep::models {

Sequential build_mlp(const ModelSpec& spec) {
  Sequential net;
  net.add(std::make_unique<Flatten>());
  net.add(std::make_unique<Linear>(flat_features(Sequential{}, spec), 256));
  net.add(std::make_unique<ReLU>());
  net.add(std::make_unique<Linear>(256, spec.num_classes));
  return net;
}

}  // namespace lockstep::models
