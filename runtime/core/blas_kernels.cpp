// OpenBLAS kernel choice and the start-up re-exec (blas_kernels.h). The one
// place in the runtime that reads the environment: OpenBLAS is configured
// only through its OPENBLAS_CORETYPE variable.
#include "core/blas_kernels.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>

namespace lockstep {

namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return r;
}

template <size_t N>
bool one_of(const std::string& name, const std::array<const char*, N>& names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// OpenBLAS's families for AVX-512 CPUs, and its own for AVX2 ones (lower case).
constexpr std::array<const char*, 3> kAvx512Families = {"skylakex", "cooperlake", "sapphirerapids"};
constexpr std::array<const char*, 3> kAvx2Families = {"haswell", "zen", "excavator"};

// kBlasChoiceVariable's three fields; empty fields when it is malformed.
struct Marker {
  std::string core, reason, reported;
};
Marker parse_marker(const char* text) {
  if (text == nullptr) return {};
  const std::string s = text;
  const size_t a = s.find('|'), b = a == std::string::npos ? a : s.find('|', a + 1);
  if (b == std::string::npos || s.find('|', b + 1) != std::string::npos) return {};
  return {s.substr(0, a), s.substr(a + 1, b - a - 1), s.substr(b + 1)};
}

}  // namespace

BlasKernelChoice choose_blas_kernels(std::string_view reported, const CpuFeatures& cpu) {
  const std::string name = lower(reported);
  // SkylakeX rather than Cooperlake on CPUs with AVX-512-BF16 too: the two
  // differ in bf16 GEMMs, which lockstep does not call, and Cooperlake's
  // sgemm measured no faster (1024^3, 1 thread, Zen 4, 7 alternating runs:
  // medians 94.4 SkylakeX, 91.3 Cooperlake GFLOP/s; docs/benchmarks.md).
  if (cpu.avx512()) return one_of(name, kAvx512Families) ? BlasKernelChoice{} : BlasKernelChoice{"SkylakeX", "AVX-512"};
  if (cpu.avx2_fma())
    return one_of(name, kAvx512Families) || one_of(name, kAvx2Families) ? BlasKernelChoice{}
                                                                        : BlasKernelChoice{"Haswell", "AVX2 and FMA"};
  return {};
}

std::string BlasKernels::describe() const {
  switch (source) {
    case Source::User: return in_use + " (OPENBLAS_CORETYPE=" + user_value + ")";
    case Source::Lockstep:
      if (lower(in_use) != lower(asked))
        return in_use + " (asked for " + asked + " for " + reason + "; this OpenBLAS kept " + in_use + ")";
      return in_use + " (chosen: " + reason + "; OpenBLAS reported " + reported + ")";
    case Source::OpenBLAS: break;
  }
  return in_use;
}

std::string blas_core_name() { return openblas_get_corename(); }

BlasKernels blas_kernels_in_use() {
  BlasKernels k;
  k.in_use = blas_core_name();
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  if (set == nullptr) return k;
  const Marker m = parse_marker(std::getenv(kBlasChoiceVariable));
  if (!m.core.empty() && m.core == set) {
    k.source = BlasKernels::Source::Lockstep;
    k.asked = m.core;
    k.reason = m.reason;
    k.reported = m.reported;
  } else {
    k.source = BlasKernels::Source::User;
    k.user_value = set;
  }
  return k;
}

void use_fast_blas_kernels(char** argv) {
  if (argv == nullptr || argv[0] == nullptr || std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const std::string reported = blas_core_name();
  const BlasKernelChoice c = choose_blas_kernels(reported, cpu_features());
  if (c.core.empty()) return;
  const std::string marker = c.core + "|" + c.reason + "|" + reported;
  if (setenv(kBlasChoiceVariable, marker.c_str(), 1) != 0 || setenv("OPENBLAS_CORETYPE", c.core.c_str(), 1) != 0)
    return;
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE");  // the exec failed: carry on with what OpenBLAS chose
  unsetenv(kBlasChoiceVariable);
}

}  // namespace lockstep
