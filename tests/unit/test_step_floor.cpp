// The training step's floor (nn/step_floor.h): Module::forward_traffic counted
// by hand for a small CNN and a residual block, and the floor's arithmetic for
// a plain and an accumulating step.
#include <catch2/catch.hpp>

#include <memory>

#include "nn/batchnorm.h"
#include "nn/layers.h"
#include "nn/residual.h"
#include "nn/sequential.h"
#include "nn/step_floor.h"

using namespace lockstep;

TEST_CASE("forward traffic: each layer's input and output once, none for ReLU, Dropout and Flatten", "[floor]") {
  Sequential net;
  net.add(std::make_unique<Conv2d>(1, 4, 3, 1, 1));  // [2,1,6,6] -> [2,4,6,6]
  net.add(std::make_unique<ReLU>());
  net.add(std::make_unique<Pool2d>(PoolKind::Max, 2));  // -> [2,4,3,3]
  net.add(std::make_unique<Dropout>(0.5f));
  net.add(std::make_unique<Flatten>());                  // -> [2,36]
  net.add(std::make_unique<Linear>(36, 10));            // -> [2,10]
  const Shape in{2, 1, 6, 6};
  const int64_t conv = 72 + 288, pool = 288 + 72, linear = 72 + 20;
  CHECK(net.forward_traffic(in) == conv + pool + linear);
  CHECK(net.forward_traffic(Shape{1, 1, 6, 6}) * 2 == net.forward_traffic(in));  // per sample, linear in the batch
}

TEST_CASE("forward traffic of a residual block: both chains and the join's read of the shortcut", "[floor]") {
  const auto block = [](bool project) {
    Sequential branch;
    branch.add(std::make_unique<Conv2d>(4, 8, 3, project ? 2 : 1, 1, /*bias=*/false));
    branch.add(std::make_unique<BatchNorm2d>(8));
    Sequential shortcut;
    if (project) shortcut.add(std::make_unique<Conv2d>(4, 8, 1, 2, 0, /*bias=*/false));
    return Residual("block", std::move(branch), std::move(shortcut));
  };
  const Shape in{1, 4, 8, 8};  // 256 elements
  // Projection: conv 256 -> 128 (8x4x4), batch norm 128 -> 128, shortcut conv 256 -> 128, join reads 128.
  CHECK(block(true).forward_traffic(in) == (256 + 128) + (128 + 128) + (256 + 128) + 128);
}

TEST_CASE("step floor: 3x the forward's FLOPs, activations twice less the input, parameter arrays", "[floor]") {
  // 10 FLOP and 100 traffic elements per sample, input 7, batch 4, 1000
  // parameters with one state array (SGD momentum), 16-bit activations.
  const StepFloor f = step_floor(10, 100, 7, 4, 1, 1000, 1, 2);
  CHECK(f.flops == 3.0 * 10 * 4);
  // (2 * 100 - 7) * 4 samples * 2 bytes + (2 + 3 + 2) * 4 bytes * 1000.
  CHECK(f.bytes == (2.0 * 100 - 7) * 4 * 2 + 7.0 * 4 * 1000);
  // Two micro-batches: twice the samples, one more weight read and gradient add each; Adam's two moments.
  const StepFloor g = step_floor(10, 100, 7, 4, 2, 1000, 2, 4);
  CHECK(g.flops == 3.0 * 10 * 8);
  CHECK(g.bytes == (2.0 * 100 - 7) * 8 * 4 + (4.0 + 3 + 4) * 4 * 1000);
}
