// Element types. fp32 is the compute type on the CPU; 16-bit types exist for
// storage, wire compression and the GPU path; fp64 for exact metric sums.
// size_of() is bytes per element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace lockstep {

enum class DType : uint8_t { F32, F16, BF16, I32, I64, U8, F64 };

constexpr size_t size_of(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::U8: return 1;
    case DType::F64: return 8;
  }
  return 0;
}

// The 16-bit floating-point types (mixed-precision activations, wire compression).
constexpr bool is_16bit_float(DType t) { return t == DType::F16 || t == DType::BF16; }

// Names as the safetensors format spells them ("F32", "BF16", ...).
constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U8: return "U8";
    case DType::F64: return "F64";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name);

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<int32_t>() { return DType::I32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::I64; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::U8; }
template <> constexpr DType dtype_of<double>() { return DType::F64; }

}  // namespace lockstep
