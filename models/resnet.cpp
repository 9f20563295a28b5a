// ResNets (He et al., "Deep Residual Learning for Image Recognition").
//
// CIFAR-style resnet20/32/56 (6n+2 layers, n = 3/5/9), for 32x32x3 inputs:
//   conv 3x3 -> 16, BN, ReLU
//   3 stages of n basic blocks with 16, 32, 64 channels (stride 2 at the
//   first block of stages 2 and 3); a basic block is
//     conv 3x3, BN, ReLU, conv 3x3, BN (+ shortcut), ReLU
//   the shortcut is the identity, or a 1x1 convolution with stride and BN
//   where the shape changes (the paper's option B);
//   global average pool, fc 64 -> classes.
// resnet50 (v1.5, as torchvision's: the stride sits on the 3x3 convolution),
// for 224x224x3 inputs and 1000 classes:
//   conv 7x7/2 -> 64, BN, ReLU, maxpool 3x3/2 (padding 1)
//   4 stages of 3, 4, 6, 3 bottleneck blocks of width 64, 128, 256, 512
//   (output 4x width; stride 2 at the first block of stages 2-4); a bottleneck is
//     conv 1x1, BN, ReLU, conv 3x3 (stride), BN, ReLU, conv 1x1 -> 4x, BN (+ shortcut), ReLU
//   global average pool, fc 2048 -> classes.
// Convolutions have no bias (the batch norm that follows has one).
#include <array>

#include "nn/batchnorm.h"
#include "nn/layers.h"
#include "nn/residual.h"
#include "registry.h"

namespace lockstep::models {
namespace {

void conv_bn(Sequential& s, int64_t in, int64_t out, int64_t k, int64_t stride, bool relu) {
  s.add(std::make_unique<Conv2d>(in, out, k, stride, k / 2, /*bias=*/false));
  s.add(std::make_unique<BatchNorm2d>(out));
  if (relu) s.add(std::make_unique<ReLU>());
}

// 1x1 convolution with stride and BN where the shape changes; identity otherwise.
Sequential projection(int64_t in, int64_t out, int64_t stride) {
  Sequential s;
  if (stride != 1 || in != out) conv_bn(s, in, out, 1, stride, false);
  return s;
}

std::unique_ptr<Module> basic_block(int64_t in, int64_t out, int64_t stride) {
  Sequential branch;
  conv_bn(branch, in, out, 3, stride, true);
  conv_bn(branch, out, out, 3, 1, false);
  return std::make_unique<Residual>(fmt::format("BasicBlock({}, {}, stride={})", in, out, stride), std::move(branch),
                                    projection(in, out, stride));
}

std::unique_ptr<Module> bottleneck(int64_t in, int64_t width, int64_t stride) {
  const int64_t out = 4 * width;
  Sequential branch;
  conv_bn(branch, in, width, 1, 1, true);
  conv_bn(branch, width, width, 3, stride, true);
  conv_bn(branch, width, out, 1, 1, false);
  return std::make_unique<Residual>(fmt::format("Bottleneck({}, {}, {}, stride={})", in, width, out, stride),
                                    std::move(branch), projection(in, out, stride));
}

Sequential resnet_cifar(const ModelSpec& spec, int n) {
  Sequential net;
  conv_bn(net, spec.sample_shape[0], 16, 3, 1, true);
  int64_t c = 16;
  for (int stage = 0; stage < 3; ++stage) {
    const int64_t out = int64_t{16} << stage;
    for (int b = 0; b < n; ++b) {
      net.add(basic_block(c, out, stage > 0 && b == 0 ? 2 : 1));
      c = out;
    }
  }
  net.add(std::make_unique<GlobalAvgPool>());
  net.add(std::make_unique<Linear>(c, spec.num_classes));
  return net;
}

}  // namespace

Sequential build_resnet20(const ModelSpec& spec) { return resnet_cifar(spec, 3); }
Sequential build_resnet32(const ModelSpec& spec) { return resnet_cifar(spec, 5); }
Sequential build_resnet56(const ModelSpec& spec) { return resnet_cifar(spec, 9); }

Sequential build_resnet50(const ModelSpec& spec) {
  Sequential net;
  conv_bn(net, spec.sample_shape[0], 64, 7, 2, true);
  net.add(std::make_unique<Pool2d>(PoolKind::Max, 3, 2, 1));
  int64_t c = 64;
  const std::array<int, 4> blocks{3, 4, 6, 3};
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t width = int64_t{64} << stage;
    for (int b = 0; b < blocks[static_cast<size_t>(stage)]; ++b) {
      net.add(bottleneck(c, width, stage > 0 && b == 0 ? 2 : 1));
      c = 4 * width;
    }
  }
  net.add(std::make_unique<GlobalAvgPool>());
  net.add(std::make_unique<Linear>(c, spec.num_classes));
  return net;
}

}  // namespace lockstep::models
