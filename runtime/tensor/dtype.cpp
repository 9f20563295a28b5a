// DType lookup by safetensors name.
#include "tensor/dtype.h"

namespace lockstep {

std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8, DType::F64})
    if (dtype_name(t) == name) return t;
  return std::nullopt;
}

}  // namespace lockstep
