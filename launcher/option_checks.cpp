// The trainer options' checks between options (check_option_combinations,
// options.h) and the note on the errors --device auto's choice caused.
#include <string>

#include "core/error.h"
#include "data/cifar10.h"
#include "data/mnist.h"
#include "options.h"

namespace lockstep {

void check_option_combinations(const TrainConfig& c) {
  LS_CHECK_INPUT(c.zero_stage == 0 || c.device != DeviceKind::Cuda,
                 "--zero-stage 1: the optimizer state is sharded on the CPU path only (not yet with --device cuda)");
  LS_CHECK_INPUT(c.comm != GpuComm::Nccl || c.device == DeviceKind::Cuda, "--comm nccl: needs --device cuda (CPU gradients go over MPI)");
  LS_CHECK_INPUT(c.precision == Precision::F32 || c.device == DeviceKind::Cuda,
                 "--precision {}: needs --device cuda (the CPU computes in fp32)", name(c.precision));
  LS_CHECK_INPUT(!c.cuda_graph || c.device == DeviceKind::Cuda, "--cuda-graph: needs --device cuda");
  LS_CHECK_INPUT(!c.cudnn_benchmark || c.device == DeviceKind::Cuda, "--cudnn-benchmark: needs --device cuda");
  LS_CHECK_INPUT(c.conv_algorithm == ConvAlgorithm::Auto || c.device != DeviceKind::Cuda,
                 "--conv-algorithm {}: chooses the CPU's convolutions (on the GPU cuDNN chooses; see --cudnn-benchmark)",
                 name(c.conv_algorithm));
  LS_CHECK_INPUT(c.conv_algorithm == ConvAlgorithm::Auto || c.layout == LayoutChoice::Nchw,
                 "--conv-algorithm {}: needs --layout nchw (NHWC convolutions on the CPU are always im2col + GEMM)",
                 name(c.conv_algorithm));
  LS_CHECK_INPUT(c.cudnn_deterministic || c.device == DeviceKind::Cuda, "--cudnn-nondeterministic: needs --device cuda");
  LS_CHECK_INPUT(c.cudnn_workspace_mb == TrainConfig{}.cudnn_workspace_mb || c.device == DeviceKind::Cuda,
                 "--cudnn-workspace-mb: needs --device cuda");
  LS_CHECK_INPUT(!c.cuda_graph || c.comm != GpuComm::Mpi,
                 "--cuda-graph and --comm mpi: a graph cannot hold the host-staged gradient average (use NCCL)");
  LS_CHECK_INPUT(!c.cuda_graph || c.accumulate_steps == 1,
                 "--cuda-graph and --accumulate-steps {}: the captured step is one forward and backward",
                 c.accumulate_steps);
  LS_CHECK_INPUT(!c.cuda_graph || c.timeline.empty(),
                 "--cuda-graph and --timeline: a replayed step has no per-layer host spans to record");
  LS_CHECK_INPUT(!c.benchmark || c.dataset == DatasetKind::Synthetic,
                 "--benchmark and --dataset {}: benchmark mode trains on synthetic data shaped for the model (drop "
                 "--dataset)", name(c.dataset));
  LS_CHECK_INPUT(c.benchmark || c.benchmark_input == TrainConfig{}.benchmark_input,
                 "--benchmark-input {}: needs --benchmark (training reads a new batch every step)",
                 name(c.benchmark_input));
  LS_CHECK_INPUT(c.benchmark_input != BenchmarkInput::Fixed || c.augment != Augment::CropFlip,
                 "--benchmark-input fixed and --augment crop-flip: the one fixed batch is made once, not augmented");
  LS_CHECK_INPUT(!c.benchmark || c.target_accuracy == 0.f,
                 "--benchmark and --target-accuracy: benchmark mode does not evaluate");
  LS_CHECK_INPUT(c.image_size == 0 || c.dataset == DatasetKind::Synthetic,
                 "--image-size and --dataset {}: --image-size shapes synthetic samples (--dataset synthetic or "
                 "--benchmark); {} keeps its own", name(c.dataset), name(c.dataset));
  LS_CHECK_INPUT(c.eval || c.target_accuracy == 0.f, "--target-accuracy needs evaluation (drop --no-eval)");
  LS_CHECK_INPUT(!c.nesterov || c.momentum > 0.f, "--nesterov needs --momentum > 0");
  LS_CHECK_INPUT(c.lr_schedule != LrScheduleKind::Step || c.lr_step_epochs > 0.f,
                 "--lr-schedule step needs --lr-step-epochs > 0");
  LS_CHECK_INPUT(c.warmup_steps == 0 || c.warmup_epochs == 0.f,
                 "--warmup-steps and --warmup-epochs: give the warmup's length once");
  LS_CHECK_INPUT(c.min_lr == 0.f || c.lr_schedule == LrScheduleKind::Cosine, "--min-lr needs --lr-schedule cosine");
  LS_CHECK_INPUT(c.min_lr < c.lr, "--min-lr {} must be below --lr {}", c.min_lr, c.lr);
  LS_CHECK_INPUT(c.dataset != DatasetKind::Tokens || c.augment != Augment::CropFlip,
                 "--augment crop-flip and --dataset tokens: crops and flips are for images");
  LS_CHECK_INPUT(c.dataset != DatasetKind::Tokens || c.data_dir != kFashionMnistDir,
                 "--dataset tokens needs --data-dir: the directory of llm.c token shards (*train*.bin, *val*.bin; "
                 "scripts/data/prepare_austen.sh makes some)");
  LS_CHECK_INPUT(c.sample_tokens == 0 || c.device != DeviceKind::Cuda,
                 "--sample-tokens: generates on the CPU (--device cpu)");
  LS_CHECK_INPUT(!c.resume || !c.checkpoint_dir.empty(), "--resume needs --checkpoint-dir");
  LS_CHECK_INPUT(c.checkpoint_every == 0 || !c.checkpoint_dir.empty(), "--checkpoint-every needs --checkpoint-dir");
  LS_CHECK_INPUT(c.dataset != DatasetKind::Cifar10 || c.data_dir != kFashionMnistDir,
                 "--dataset cifar10 needs --data-dir: the directory of data_batch_1.bin ... data_batch_5.bin and "
                 "test_batch.bin (from {})",
                 kCifar10Url);
}

std::string auto_device_note(const TrainConfig& c, const std::string& message) {
  // A check about the device names it; and the other device must not fail the same way.
  if (c.device_auto_why.empty()) return "";
  if (message.find("--device") == std::string::npos && message.find("GPU") == std::string::npos) return "";
  TrainConfig other = c;
  other.device = c.device == DeviceKind::Cuda ? DeviceKind::Cpu : DeviceKind::Cuda;
  try {
    check_option_combinations(other);
  } catch (const InputError& e) {
    if (e.message() == message) return "";  // the same error on either device
  }
  return fmt::format("; --device auto chose the {}: {}", c.device == DeviceKind::Cuda ? "GPU" : "CPU", c.device_auto_why);
}

}  // namespace lockstep
