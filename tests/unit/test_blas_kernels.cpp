// The CPU-kernel choices (core/blas_kernels.h, core/cpu_features.h,
// ops/simd_level.h): OpenBLAS's family from the CPU's features whatever name
// OpenBLAS reported, the start-up description of what runs, and this
// machine's features and vector-kernel clone read the way /proc/cpuinfo
// reads them.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/blas_kernels.h"
#include "core/cpu_features.h"
#include "ops/simd_level.h"

using namespace lockstep;

namespace {

CpuFeatures avx512(bool bf16 = false) {
  CpuFeatures f;
  f.avx2 = f.fma = f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = true;
  f.avx512_bf16 = bf16;
  return f;
}
CpuFeatures avx2_fma() {
  CpuFeatures f;
  f.avx2 = f.fma = true;
  return f;
}

// "core reason", or "keep" when OpenBLAS's choice stands.
std::string choice(const std::string& reported, const CpuFeatures& f) {
  const BlasKernelChoice c = choose_blas_kernels(reported, f);
  if (c.core.empty()) {
    CHECK(c.reason.empty());
    return "keep";
  }
  return c.core + " " + c.reason;
}

// This machine's CPU flags as the kernel reports them (x86 Linux).
std::set<std::string> cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      std::set<std::string> flags;
      for (std::string w; words >> w;) flags.insert(w);
      return flags;
    }
  return {};
}

}  // namespace

TEST_CASE("an AVX-512 CPU gets SkylakeX kernels unless OpenBLAS runs an AVX-512 family", "[blas]") {
  // The unrecognised CPU: OpenBLAS 0.3.21's generic fallback on a recent Xeon.
  CHECK(choice("Prescott", avx512()) == "SkylakeX AVX-512");
  CHECK(choice("Prescott", avx512(true)) == "SkylakeX AVX-512");  // bf16 too: Cooperlake's sgemm is no faster
  for (const char* fallback : {"Katmai", "Core2", "Nehalem", "Penryn", "Dunnington", "Atom", "Sandybridge", "Barcelona",
                               "Bulldozer", "Piledriver", "Unknown", ""})
    CHECK(choice(fallback, avx512()) == "SkylakeX AVX-512");
  // AVX2-only families on an AVX-512 CPU (Zen 5 on 0.3.21): half the sgemm rate.
  CHECK(choice("Haswell", avx512()) == "SkylakeX AVX-512");
  CHECK(choice("Zen", avx512(true)) == "SkylakeX AVX-512");
  CHECK(choice("Excavator", avx512()) == "SkylakeX AVX-512");
  // OpenBLAS recognised it: its choice stands, whatever the spelling.
  for (const char* known : {"SkylakeX", "Cooperlake", "SapphireRapids", "SKYLAKEX", "cooperlake"}) {
    CHECK(choice(known, avx512()) == "keep");
    CHECK(choice(known, avx512(true)) == "keep");
  }
}

TEST_CASE("an AVX2+FMA CPU gets Haswell kernels unless OpenBLAS runs an AVX2 or AVX-512 family", "[blas]") {
  for (const char* fallback : {"Prescott", "Core2", "Katmai", "Nehalem", "Sandybridge", "Piledriver", "Unknown"})
    CHECK(choice(fallback, avx2_fma()) == "Haswell AVX2 and FMA");
  for (const char* known : {"Haswell", "Zen", "Excavator", "HASWELL", "zen", "SkylakeX", "Cooperlake"})
    CHECK(choice(known, avx2_fma()) == "keep");
}

TEST_CASE("without AVX2 and FMA, or with a partial AVX-512, OpenBLAS's choice stands where it should", "[blas]") {
  CpuFeatures none;
  CHECK(choice("Prescott", none) == "keep");
  CpuFeatures avx2_only;
  avx2_only.avx2 = true;  // no FMA: Haswell's kernels would not run
  CHECK(choice("Prescott", avx2_only) == "keep");
  CpuFeatures fma_only;
  fma_only.fma = true;  // Piledriver: FMA without AVX2
  CHECK(choice("Piledriver", fma_only) == "keep");
  // AVX-512F without BW/VL/DQ (Knights Landing): SkylakeX's kernels need
  // them, so the AVX2 rule applies.
  CpuFeatures knl = avx2_fma();
  knl.avx512f = true;
  CHECK(!knl.avx512());
  CHECK(choice("Prescott", knl) == "Haswell AVX2 and FMA");
  CHECK(choice("Haswell", knl) == "keep");
}

TEST_CASE("the start-up description says what runs and who chose it", "[blas]") {
  BlasKernels k;
  k.in_use = "Cooperlake";
  CHECK(k.describe() == "Cooperlake");
  k.in_use = "Prescott";
  k.source = BlasKernels::Source::User;
  k.user_value = "Prescott";
  CHECK(k.describe() == "Prescott (OPENBLAS_CORETYPE=Prescott)");
  k.in_use = "SkylakeX";
  k.source = BlasKernels::Source::Lockstep;
  k.asked = "SkylakeX";
  k.reason = "AVX-512";
  k.reported = "Prescott";
  CHECK(k.describe() == "SkylakeX (chosen: AVX-512; OpenBLAS reported Prescott)");
  k.in_use = "Prescott";  // an OpenBLAS built for one target ignores OPENBLAS_CORETYPE
  CHECK(k.describe() == "Prescott (asked for SkylakeX for AVX-512; this OpenBLAS kept Prescott)");
}

TEST_CASE("feature names for the logs", "[blas]") {
  CHECK(CpuFeatures{}.describe() == "no AVX2");
  CHECK(avx2_fma().describe() == "AVX2, FMA");
  CHECK(avx512().describe() == "AVX-512 (F, BW, VL, DQ)");
  CpuFeatures spr = avx512(true);
  spr.amx = true;
  CHECK(spr.describe() == "AVX-512 (F, BW, VL, DQ), AVX-512-BF16, AMX");
}

TEST_CASE("this machine's features and vector-kernel clone agree with /proc/cpuinfo", "[blas]") {
  const std::set<std::string> flags = cpuinfo_flags();
  if (flags.empty()) {
    WARN("no flags line in /proc/cpuinfo: nothing to compare with");
    return;
  }
  const auto has = [&](const char* f) { return flags.count(f) > 0; };
  const CpuFeatures f = cpu_features();
  CHECK(f.avx2 == has("avx2"));
  CHECK(f.fma == has("fma"));
  CHECK(f.avx512f == has("avx512f"));
  CHECK(f.avx512bw == has("avx512bw"));
  CHECK(f.avx512vl == has("avx512vl"));
  CHECK(f.avx512dq == has("avx512dq"));
  CHECK(f.avx512_bf16 == has("avx512_bf16"));
  CHECK(f.amx == (has("amx_tile") && has("amx_bf16")));
  // The clones are picked on the x86-64-v3 feature set (never a model name).
  const bool v3 = has("avx") && has("avx2") && has("bmi1") && has("bmi2") && has("f16c") && has("fma") &&
                  has("abm") && has("movbe") && has("xsave");
  const std::string level = ops::simd_clone_level();
  if (level != "not cloned") CHECK(level == (v3 ? "x86-64-v3" : "x86-64 baseline"));
}
