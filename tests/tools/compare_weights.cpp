// compare_weights A B [--exact | --rtol X]: compares two safetensors weight
// files tensor by tensor. Prints the largest absolute and relative difference
// (relative to the largest magnitude of the tensor in A) and whether the files
// are bitwise equal; exits 1 when they differ beyond the tolerance (or at all,
// with --exact), 2 when they cannot be compared.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "checkpoint/safetensors.h"

using namespace lockstep;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: compare_weights A B [--exact | --rtol X]\n");
    return 2;
  }
  bool exact = false;
  double rtol = 1e-5;
  for (int i = 3; i < argc; ++i) {
    if (std::string(argv[i]) == "--exact") exact = true;
    if (std::string(argv[i]) == "--rtol" && i + 1 < argc) rtol = std::stod(argv[++i]);
  }
  try {
    const auto a = SafetensorsFile::read(argv[1]);
    const auto b = SafetensorsFile::read(argv[2]);
    bool bitwise = a.names() == b.names();
    double max_abs = 0, max_rel = 0;
    std::string worst;
    for (const auto& name : a.names()) {
      if (!b.contains(name)) {
        std::printf("tensor %s missing from %s\n", name.c_str(), argv[2]);
        return 1;
      }
      const auto& ea = a.entry(name);
      const auto& eb = b.entry(name);
      if (!(ea.shape == eb.shape) || ea.dtype != DType::F32 || eb.dtype != DType::F32) {
        std::printf("tensor %s: %s vs %s\n", name.c_str(), ea.shape.str().c_str(), eb.shape.str().c_str());
        return 1;
      }
      bitwise = bitwise && std::memcmp(ea.data, eb.data, ea.nbytes()) == 0;
      const float* pa = static_cast<const float*>(ea.data);
      const float* pb = static_cast<const float*>(eb.data);
      double scale = 0, diff = 0;
      for (int64_t i = 0; i < ea.shape.numel(); ++i) {
        scale = std::max(scale, static_cast<double>(std::fabs(pa[i])));
        diff = std::max(diff, static_cast<double>(std::fabs(pa[i] - pb[i])));
      }
      const double rel = scale > 0 ? diff / scale : diff;
      max_abs = std::max(max_abs, diff);
      if (rel > max_rel) {
        max_rel = rel;
        worst = name;
      }
    }
    std::printf("max abs diff %.3e, max rel diff %.3e%s, bitwise %s\n", max_abs, max_rel,
                worst.empty() ? "" : (" (" + worst + ")").c_str(), bitwise ? "equal" : "different");
    if (exact) return bitwise ? 0 : 1;
    return max_rel <= rtol ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compare_weights: %s\n", e.what());
    return 2;
  }
}
