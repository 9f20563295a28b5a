// The spellings of the trainer's choices (choices.h).
#include "choices.h"

namespace lockstep {

std::string_view name(DeviceKind d) {
  return d == DeviceKind::Cpu ? "cpu" : d == DeviceKind::Cuda ? "cuda" : "auto";
}
std::string_view name(Precision p) { return p == Precision::BF16 ? "bf16" : p == Precision::F16 ? "fp16" : "fp32"; }
std::string_view name(GpuComm c) { return c == GpuComm::Nccl ? "nccl" : c == GpuComm::Mpi ? "mpi" : "auto"; }
std::string_view name(GradOp g) { return g == GradOp::Sum ? "sum" : "average"; }
std::string_view name(DatasetKind d) {
  return d == DatasetKind::MnistFormat ? "mnist-format"
         : d == DatasetKind::Cifar10   ? "cifar10"
         : d == DatasetKind::Synthetic ? "synthetic"
         : d == DatasetKind::Tokens    ? "tokens"
                                       : "fashion-mnist";
}
std::string_view name(LayoutChoice l) { return l == LayoutChoice::Nchw ? "nchw" : l == LayoutChoice::Nhwc ? "nhwc" : "auto"; }
std::string_view name(GradCompression g) {
  return g == GradCompression::F16 ? "fp16" : g == GradCompression::BF16 ? "bf16" : "none";
}
std::string_view name(Switch s) { return s == Switch::On ? "on" : s == Switch::Off ? "off" : "auto"; }
std::string_view name(Augment a) { return a == Augment::None ? "none" : a == Augment::CropFlip ? "crop-flip" : "auto"; }
std::string_view name(BenchmarkInput b) { return b == BenchmarkInput::Fixed ? "fixed" : "loader"; }
std::string_view name(OptimizerKind o) {
  return o == OptimizerKind::Adam ? "adam" : o == OptimizerKind::AdamW ? "adamw" : "sgd";
}
std::string_view name(LrScheduleKind l) {
  return l == LrScheduleKind::Step ? "step" : l == LrScheduleKind::Cosine ? "cosine" : "constant";
}
std::string_view name(LrScaling l) { return l == LrScaling::Linear ? "linear" : "none"; }
std::string_view name(ConvAlgorithm a) {
  return a == ConvAlgorithm::Im2col ? "im2col" : a == ConvAlgorithm::Winograd ? "winograd" : "auto";
}

std::string_view name(CheckpointWrite w) { return w == CheckpointWrite::Sync ? "sync" : "background"; }
std::string_view name(CheckpointFailure f) { return f == CheckpointFailure::Stop ? "stop" : "continue"; }

void not_one_of(const std::string& flag, const std::string& value, const std::vector<std::string_view>& names) {
  std::string list;
  for (std::string_view n : names) list += (list.empty() ? "" : ", ") + std::string(n);
  LS_INPUT_ERROR("--{}: '{}' is not one of {}", flag, value, list);
}

std::string one_of(const std::string& flag, const std::string& value,
                   std::initializer_list<std::string_view> names) {
  for (std::string_view n : names)
    if (value == n) return value;
  not_one_of(flag, value, names);
}

}  // namespace lockstep
