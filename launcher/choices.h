// The trainer's choices that the code branches on, as enums parsed once by
// options.cpp (parse_choice), with name() giving the option's spelling back
// for messages, records and fingerprints.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "core/error.h"

namespace lockstep {

enum class DeviceKind { Auto, Cpu, Cuda };  // Auto: only until parse_train_options resolves it
enum class Precision { F32, BF16, F16 };
enum class GpuComm { Auto, Nccl, Mpi };
enum class GradOp { Average, Sum };
enum class DatasetKind { FashionMnist, MnistFormat, Cifar10, Synthetic };
enum class LayoutChoice { Auto, Nchw, Nhwc };  // Auto: only until parse_train_options resolves it
enum class GradCompression { None, F16, BF16 };
std::string_view name(DeviceKind d);  // "auto", "cpu", "cuda"
std::string_view name(Precision p);   // "fp32", "bf16", "fp16"
std::string_view name(GpuComm c);     // "auto", "nccl", "mpi"
std::string_view name(GradOp g);      // "average", "sum"
std::string_view name(DatasetKind d);  // "fashion-mnist", "mnist-format", "cifar10", "synthetic"
std::string_view name(LayoutChoice l);  // "auto", "nchw", "nhwc"
std::string_view name(GradCompression g);  // "none", "fp16", "bf16"

// The enum whose name() is `value`, else an input error listing the names.
template <typename E>
E parse_choice(const std::string& flag, const std::string& value, std::initializer_list<E> all) {
  for (E e : all)
    if (value == name(e)) return e;
  std::string list;
  for (E e : all) list += (list.empty() ? "" : ", ") + std::string(name(e));
  LS_INPUT_ERROR("--{}: '{}' is not one of {}", flag, value, list);
}

}  // namespace lockstep
