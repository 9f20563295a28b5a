// Where a tensor's bytes live: host memory or one CUDA device.
#pragma once

#include <string>

namespace lockstep {

struct Device {
  enum class Kind { CPU, CUDA };
  Kind kind = Kind::CPU;
  int index = 0;  // CUDA ordinal; 0 for CPU

  static Device cpu() { return {Kind::CPU, 0}; }
  static Device cuda(int index) { return {Kind::CUDA, index}; }
  bool is_cpu() const { return kind == Kind::CPU; }
  bool is_cuda() const { return kind == Kind::CUDA; }
  bool operator==(const Device&) const = default;
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

}  // namespace lockstep
