// convnet, the multi-GPU notebook's CNN (6 convolutions, 'same' padding):
//   [conv 5x5 -> 128, conv 5x5 -> 128, maxpool 2]
//   2x [conv 3x3 -> 128, conv 3x3 -> 128, maxpool 2]      ReLU after every conv
//   flatten (128*3*3 for 28x28), fc -> classes.
#include "nn/layers.h"
#include "registry.h"

namespace lockstep::models {

Sequential build_convnet(const ModelSpec& spec) {
  Sequential net;
  int64_t c = spec.sample_shape[0];
  for (int64_t k : {5, 3, 3}) {
    for (int i = 0; i < 2; ++i) {
      net.add(std::make_unique<Conv2d>(c, 128, k, 1, k / 2));
      net.add(std::make_unique<ReLU>());
      c = 128;
    }
    net.add(std::make_unique<Pool2d>(PoolKind::Max, 2));
  }
  net.add(std::make_unique<Flatten>());
  net.add(std::make_unique<Linear>(flat_features(net, spec), spec.num_classes));
  return net;
}

}  // namespace lockstep::models
