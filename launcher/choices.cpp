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

}  // namespace lockstep
