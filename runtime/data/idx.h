// Reader for the IDX format of MNIST-style data sets, plain or gzip-compressed
// (zlib detects which). Only unsigned-byte data (type 0x08) is accepted, which
// is what MNIST and Fashion-MNIST use. Every malformed input is an InputError
// naming the file: bad magic, bad type, absurd dimensions, truncation,
// trailing bytes, corrupt compression.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // product(dims) bytes
};

IdxArray read_idx(const std::string& path);

// For tests and tools: write an uncompressed or gzip IDX file of unsigned bytes.
void write_idx(const std::string& path, const std::vector<int64_t>& dims, const std::vector<uint8_t>& data, bool gzip);

}  // namespace lockstep
