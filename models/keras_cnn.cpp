// keras-cnn, the Keras MNIST example CNN used by the seed's Fashion-MNIST runs:
//   conv 3x3 -> 32, ReLU; conv 3x3 -> 64, ReLU; maxpool 2; dropout 0.25;
//   flatten (9216 for 28x28); fc -> 128, ReLU; dropout 0.5; fc -> classes.
#include "nn/layers.h"
#include "registry.h"

namespace lockstep::models {

Sequential build_keras_cnn(const ModelSpec& spec) {
  Sequential net;
  net.add(std::make_unique<Conv2d>(spec.sample_shape[0], 32, 3));
  net.add(std::make_unique<ReLU>());
  net.add(std::make_unique<Conv2d>(32, 64, 3));
  net.add(std::make_unique<ReLU>());
  net.add(std::make_unique<Pool2d>(PoolKind::Max, 2));
  net.add(std::make_unique<Dropout>(0.25f));
  net.add(std::make_unique<Flatten>());
  net.add(std::make_unique<Linear>(flat_features(net, spec), 128));
  net.add(std::make_unique<ReLU>());
  net.add(std::make_unique<Dropout>(0.5f));
  net.add(std::make_unique<Linear>(128, spec.num_classes));
  return net;
}

}  // namespace lockstep::models
