// lenet, from the seed's LeNet-on-Fashion-MNIST comparison:
//   conv 3x3 -> 20, ReLU, avgpool 2; conv 5x5 -> 50, ReLU, avgpool 2;
//   flatten (800 for 28x28); fc -> 128, ReLU; fc -> classes.
#include "nn/layers.h"
#include "registry.h"

namespace lockstep::models {

Sequential build_lenet(const ModelSpec& spec) {
  Sequential net;
  net.add(std::make_unique<Conv2d>(spec.sample_shape[0], 20, 3));
  net.add(std::make_unique<ReLU>());
  net.add(std::make_unique<Pool2d>(PoolKind::Avg, 2));
  net.add(std::make_unique<Conv2d>(20, 50, 5));
  net.add(std::make_unique<ReLU>());
  net.add(std::make_unique<Pool2d>(PoolKind::Avg, 2));
  net.add(std::make_unique<Flatten>());
  const int64_t flat = flat_features(net, spec);
  net.add(std::make_unique<Linear>(flat, 128));
  net.add(std::make_unique<ReLU>());
  net.add(std::make_unique<Linear>(128, spec.num_classes));
  return net;
}

}  // namespace lockstep::models
