// CPU features from CPUID (cpu_features.h).
#include "core/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstdint>

namespace lockstep {

namespace {

#if defined(__x86_64__)
// CPUID leaf 7, sub-leaf `sub`: {eax, ebx, ecx, edx}, zeros where the CPU has no such leaf.
struct Leaf7 {
  unsigned a = 0, b = 0, c = 0, d = 0;
};
Leaf7 leaf7(unsigned sub) {
  Leaf7 r;
  if (__get_cpuid_max(0, nullptr) < 7 || !__get_cpuid_count(7, sub, &r.a, &r.b, &r.c, &r.d)) return {};
  return r;
}

// The OS saves the AMX tile state (XCR0 bits 17 and 18); OSXSAVE is checked first.
bool os_saves_amx_state() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;
  uint32_t lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & (3u << 17)) == (3u << 17);
}
#endif

}  // namespace

std::string CpuFeatures::describe() const {
  std::string s;
  const auto add = [&s](const char* what) { s += (s.empty() ? "" : ", ") + std::string(what); };
  if (avx512()) add("AVX-512 (F, BW, VL, DQ)");
  else if (avx512f) add("AVX-512F without BW/VL/DQ");
  if (avx512_bf16) add("AVX-512-BF16");
  if (amx) add("AMX");
  if (!avx512()) {
    if (avx2) add("AVX2");
    if (fma) add("FMA");
  }
  return s.empty() ? "no AVX2" : s;
}

CpuFeatures cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__)
  // __builtin_cpu_supports also checks that the OS saves the YMM/ZMM state.
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  // Not every compiler's builtin knows these two: CPUID directly.
  f.avx512_bf16 = f.avx512f && (leaf7(1).a & (1u << 5));
  const Leaf7 l = leaf7(0);
  f.amx = (l.d & (1u << 24)) && (l.d & (1u << 22)) && os_saves_amx_state();  // AMX-TILE and AMX-BF16
#endif
  return f;
}

}  // namespace lockstep
