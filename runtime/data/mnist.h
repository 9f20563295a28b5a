// MNIST-format data sets (MNIST, Fashion-MNIST): the four IDX files
// {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] in one directory.
#pragma once

#include <memory>
#include <string>

#include "data/dataset.h"

namespace lockstep {

struct MnistSplits {
  std::unique_ptr<InMemoryDataset> train;
  std::unique_ptr<InMemoryDataset> test;
};

// Loads both splits and normalises them with the training set's pixel statistics.
// Any missing or malformed file is an InputError naming it.
MnistSplits load_mnist_format(const std::string& dir, const std::string& name);

constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

}  // namespace lockstep
