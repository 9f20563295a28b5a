// The trainer's choices that the code branches on, as enums parsed once by
// options.cpp (parse_choice), with name() giving the option's spelling back
// for messages, records and fingerprints.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace lockstep {

enum class DeviceKind { Auto, Cpu, Cuda };  // Auto: only until parse_train_options resolves it
enum class Precision { F32, BF16, F16 };
enum class GpuComm { Auto, Nccl, Mpi };
enum class GradOp { Average, Sum };
enum class DatasetKind { FashionMnist, MnistFormat, Cifar10, Synthetic, Tokens };
enum class LayoutChoice { Auto, Nchw, Nhwc };  // Auto: only until parse_train_options resolves it
enum class GradCompression { None, F16, BF16 };
// --overlap, --hierarchical-allreduce and --progress; what Auto chooses is
// each option's own (TrainConfig, options.h).
enum class Switch { Auto, On, Off };
enum class Augment { Auto, None, CropFlip };  // Auto: crop-flip for cifar10, else none (augmentation(), options.h)
enum class BenchmarkInput { Loader, Fixed };
enum class OptimizerKind { Sgd, Adam, AdamW };
enum class LrScheduleKind { Constant, Step, Cosine };
enum class LrScaling { None, Linear };
enum class ConvAlgorithm { Auto, Im2col, Winograd };  // Auto: Winograd where it suits a layer, else im2col + GEMM
enum class CheckpointWrite { Background, Sync };
enum class CheckpointFailure { Continue, Stop };
std::string_view name(DeviceKind d);  // "auto", "cpu", "cuda"
std::string_view name(Precision p);   // "fp32", "bf16", "fp16"
std::string_view name(GpuComm c);     // "auto", "nccl", "mpi"
std::string_view name(GradOp g);      // "average", "sum"
std::string_view name(DatasetKind d);  // "fashion-mnist", "mnist-format", "cifar10", "synthetic", "tokens"
std::string_view name(LayoutChoice l);  // "auto", "nchw", "nhwc"
std::string_view name(GradCompression g);  // "none", "fp16", "bf16"
std::string_view name(Switch s);          // "auto", "on", "off"
std::string_view name(Augment a);         // "auto", "none", "crop-flip"
std::string_view name(BenchmarkInput b);  // "loader", "fixed"
std::string_view name(OptimizerKind o);   // "sgd", "adam", "adamw"
std::string_view name(LrScheduleKind l);  // "constant", "step", "cosine"
std::string_view name(LrScaling l);       // "none", "linear"
std::string_view name(ConvAlgorithm a);   // "auto", "im2col", "winograd"
std::string_view name(CheckpointWrite w);    // "background", "sync"
std::string_view name(CheckpointFailure f);  // "continue", "stop"

// The input error for --flag's `value` outside `names` (listed in order).
[[noreturn]] void not_one_of(const std::string& flag, const std::string& value,
                             const std::vector<std::string_view>& names);

// `value` when it is one of `names`, else not_one_of.
std::string one_of(const std::string& flag, const std::string& value,
                   std::initializer_list<std::string_view> names);

// The enum whose name() is `value`, else not_one_of.
template <typename E>
E parse_choice(const std::string& flag, const std::string& value, std::initializer_list<E> all) {
  std::vector<std::string_view> names;
  for (E e : all) {
    if (value == name(e)) return e;
    names.push_back(name(e));
  }
  not_one_of(flag, value, names);
}

}  // namespace lockstep
