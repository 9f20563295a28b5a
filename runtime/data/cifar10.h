// CIFAR-10 in its binary format: one directory with data_batch_1.bin …
// data_batch_5.bin (training) and test_batch.bin (test). A file is a sequence
// of 3073-byte records: one label byte (0–9), then 3072 pixel bytes — 1024 red,
// 1024 green, 1024 blue, each plane 32×32 row-major — so a record's pixels are
// already one [3, 32, 32] sample.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace lockstep {

constexpr int64_t kCifar10Channels = 3, kCifar10Side = 32;
constexpr int64_t kCifar10PixelBytes = kCifar10Channels * kCifar10Side * kCifar10Side;  // 3072
constexpr int64_t kCifar10RecordBytes = 1 + kCifar10PixelBytes;                         // 3073
constexpr const char* kCifar10Url = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz";

struct Cifar10Splits {
  std::unique_ptr<InMemoryDataset> train;  // uint8 [N, 3, 32, 32], the five data_batch files in order
  std::unique_ptr<InMemoryDataset> test;   // uint8 [M, 3, 32, 32], test_batch.bin
};

// Reads the records of `paths`, in order, into one data set of uint8
// [N, 3, 32, 32] (not normalised). Each file may hold any whole number (at
// least 1) of records. A missing, empty, not-whole or mislabelled file is an
// InputError naming the file (and, for a label, the record index).
std::unique_ptr<InMemoryDataset> read_cifar10_files(const std::vector<std::string>& paths, const std::string& name);

// Loads both splits and normalises them with the training set's pixel
// statistics (one mean and standard deviation over all channels, as for
// MNIST-format data). Any missing or malformed file is an InputError naming it.
Cifar10Splits load_cifar10(const std::string& dir);

}  // namespace lockstep
