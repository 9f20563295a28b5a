// 16 bytes of activations per thread (.cu files only): 8 bf16/half or 4
// floats in one load or store, for element-wise and channels-last kernels
// whose channel count C is a multiple of the pack. Kernels widen each element
// through cuda::load/store on the register copy, so a packed kernel computes
// the same per-element expressions, with the same bits, as its scalar twin.
// Element i = kV * v + e of pack v has channel (kV * v) % C + e.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace lockstep::cuda {

// V elements (default: 16 bytes' worth); a kernel templated on V serves the
// packed case and, with V = 1, the scalar one with the same code.
template <typename T, int V = static_cast<int>(16 / sizeof(T))>
struct alignas(sizeof(T) * V) Pack {
  static constexpr int kV = V;
  T e[V];
};

// Whether a kernel may go 16 bytes at a time: C a multiple of the pack and
// every pointer 16-byte aligned (null: not used).
template <typename T>
bool packable(int64_t channels, std::initializer_list<const void*> ptrs) {
  if (channels % Pack<T>::kV != 0) return false;
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % alignof(Pack<T>) != 0) return false;
  return true;
}

}  // namespace lockstep::cuda
