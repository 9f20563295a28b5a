// The trainer's configuration: one struct, filled from the command line
// (cxxopts) and from LOCKSTEP_<OPTION> environment variables, mapped here and
// nowhere else. The command line wins over the environment.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "choices.h"

namespace lockstep {


// Where an option's effective value came from, for the configuration log.
struct OptionSetting {
  std::string option;  // "batch-size"
  std::string value;   // as given ("true"/"false" for switches)
  std::string source;  // "default", "command line" or the variable, e.g. "LOCKSTEP_BATCH_SIZE"
};

struct TrainConfig {
  // model and data
  std::string model = "lenet";
  DatasetKind dataset = DatasetKind::FashionMnist;  // fashion-mnist | mnist-format | cifar10 | synthetic
  std::string data_dir;                   // default: /usr/share/datasets/fashion-mnist
  Augment augment = Augment::Auto;        // auto (crop-flip for cifar10, else none) | none | crop-flip
  std::vector<int64_t> synthetic_shape{1, 28, 28};  // default: the model's input (models/registry.h)
  int64_t synthetic_classes = 10;                  // default: the model's
  int64_t synthetic_samples = 10000;               // 0 (--benchmark without it): enough for the run's steps
  int64_t image_size = 0;                          // H = W of synthetic samples (0 = the model's)
  bool benchmark = false;  // synthetic data shaped for the model, no evaluation, images/s and ms per step at the end
  BenchmarkInput benchmark_input = BenchmarkInput::Loader;  // --benchmark: loader (a new batch each step) | fixed
                                                           // (one device batch)
  // token sequences: --dataset tokens and the GPT-2 models (sequence_options.cpp)
  int64_t vocab_size = 50257;  // tokens' vocabulary (GPT-2's BPE); the models' output size
  int64_t seq_len = 0;         // tokens per sample; 0 until parsed: the model's context
  int64_t n_layer = 0, n_head = 0, n_embd = 0;  // GPT-2 sizes replacing the model's (0 = keep)
  std::string vocab_file;      // GPT-2's BPE ranks (gpt2.tiktoken) for --sample-tokens and --prompt
  int64_t sample_tokens = 0;   // rank 0 generates this many tokens after training
  std::string prompt;          // the text that sample continues
  // schedule
  int64_t epochs = 10;
  int64_t max_steps = 0;  // 0 = no limit
  int64_t batch_size = 128;         // per process
  int64_t global_batch_size = 0;    // 0 = batch_size * world; else split evenly
  int64_t eval_batch_size = 0;      // 0 = the training batch per process (evaluation fits where training does)
  int accumulate_steps = 1;         // backward passes per optimizer step
  float target_accuracy = 0.f;      // stop after the epoch whose test accuracy reaches this (0 = off)
  bool eval = true;                 // evaluate on the test set after each epoch (--no-eval: never)
  // optimisation
  OptimizerKind optimizer = OptimizerKind::Sgd;  // sgd | adam | adamw
  float lr = 0.05f;
  float momentum = 0.9f;
  bool nesterov = false;
  float weight_decay = 0.f;
  LrScheduleKind lr_schedule = LrScheduleKind::Constant;  // constant | step | cosine
  float warmup_epochs = 0.f;
  int64_t warmup_steps = 0;    // beside --warmup-epochs: optimizer steps of linear warmup
  float min_lr = 0.f;          // cosine schedule's floor
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam / adamw
  float lr_step_epochs = 0.f;  // step schedule: decay every this many epochs
  float lr_gamma = 0.1f;
  // The large-batch recipe (launcher/recipe.h)
  LrScaling lr_scaling = LrScaling::None;  // none | linear: the LR is lr x global batch / base_batch_size
  int64_t base_batch_size = 256;    // the global batch --lr is meant for
  bool decay_bn_bias = true;        // --no-decay-bn-bias: no weight decay on parameters declared decay=false
  float label_smoothing = 0.f;      // cross-entropy target (1 - eps) onehot + eps / classes
  float clip_grad_norm = 0.f;       // > 0: clip the averaged gradient to this global L2 norm (optim/grad_clip.h)
  int zero_stage = 0;               // 1: optimizer state sharded over the ranks (ZeRO-1, optim/distributed_optimizer.h)
  uint64_t seed = 42;
  // execution
  int threads = 0;  // 0 = cores / local processes
  int loader_threads = 0;  // threads assembling each batch; 0 = auto (1 on the CPU, up to 4 spare cores on a GPU)
  DeviceKind device = DeviceKind::Auto;   // cpu | cuda once parsed (auto: the GPU when there is one)
  GpuComm comm = GpuComm::Auto;           // GPU gradient transport: auto, nccl or mpi (staged through host memory)
  Precision precision = Precision::F32;   // fp32, or bf16/fp16 activations with fp32 master weights (GPU)
  float loss_scale = 65536.f;             // fp16: initial dynamic loss scale (torch GradScaler's default)
  int loss_scale_window = 2000;           // fp16: finite steps before the scale doubles
  bool cuda_graph = false;                // GPU: capture the training step once, replay it every step
  LayoutChoice layout = LayoutChoice::Auto;  // memory order of 4-D activations: nchw or nhwc once parsed (tensor/layout.h;
                                          // auto: nhwc for 16-bit on the GPU, device_check.h)
  ConvAlgorithm conv_algorithm = ConvAlgorithm::Auto;  // CPU convolutions: auto, im2col or winograd
                                                       // (ops/conv/conv2d_cpu.h)
  bool cudnn_benchmark = false;           // GPU: time cuDNN's convolution algorithms, take the fastest
  bool cudnn_deterministic = true;        // GPU: deterministic convolution algorithms only (--cudnn-nondeterministic)
  int64_t cudnn_workspace_mb = 512;       // GPU: most scratch one cuDNN convolution call may use (MiB)
  GradOp grad_op = GradOp::Average;  // average | sum over ranks
  float fusion_threshold_mb = 25.f; // gradient bucket cap
  float first_bucket_mb = 1.f;      // cap of the first bucket (starts communication early)
  Switch overlap = Switch::Auto;    // reduce buckets during backward: auto | on | off (--no-overlap: off;
                                    // auto is resolved by the trainer, thread_counts.h)
  bool sync_batchnorm = false;      // batch norm statistics over all ranks' samples, not each rank's
  Switch hierarchical_allreduce = Switch::Auto;  // across hosts, sum within each host, then along them: auto | on |
                                                 // off (auto: where the ranks are grouped by host, 2 or more on each)
  GradCompression grad_compression = GradCompression::None;  // none | fp16 | bf16
  float collective_timeout_s = 300.f;     // watchdog: a collective older than this ends the job (0 = off)
  int64_t check_replicas_every = 0;       // steps between parameter checksum comparisons (0 = off)
  // Fault injection for the reliability tests, after STEP on RANK:
  // "replica-drift@RANK:STEP" nudges one parameter, so the replica guard has
  // something to find; "error@RANK:STEP" throws an error ("error@all:STEP" on
  // every rank), so the ending of a failed job can be tested.
  std::string inject_fault;
  std::string inject_kind;  // replica-drift | error
  int inject_rank = -1;     // with inject_every_rank: every rank
  bool inject_every_rank = false;
  int64_t inject_step = 0;
  // checkpoints
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;     // steps; 0 = only at the end of each epoch
  int keep_checkpoints = 3;
  bool resume = false;
  // Rank 0 copies the state at the step and writes it on a thread of its own
  // while training goes on (background), or writes before the next step (sync).
  CheckpointWrite checkpoint_write = CheckpointWrite::Background;
  // A write that fails (disk full, permissions): warn and keep training with
  // the checkpoints already on disk, or stop every rank at the next
  // checkpoint or the end of training, whichever comes first.
  CheckpointFailure checkpoint_failure = CheckpointFailure::Continue;
  // outputs
  std::string metrics_file;
  std::string tensorboard_dir;    // TensorBoard event files (rank 0)
  // LOCKSTEP_RUN_ATTEMPT, set by lockstep-run's restart supervisor: the
  // failure this attempt recovers from (a JSON object), written by rank 0 to
  // the metrics file and TensorBoard after its first step. Empty otherwise.
  std::string restart_record;
  std::string save_weights;
  std::string load_weights;
  std::string timeline;           // Chrome trace per rank
  Switch progress = Switch::Auto;  // auto (on a terminal, not under a job launcher) | on | off
  std::string log_level = "info";
  bool log_all_ranks = false;
  // provenance (filled by parse_train_options; logged once by rank 0)
  std::vector<OptionSetting> settings;     // every option, in --help order
  std::vector<std::string> unknown_env;    // LOCKSTEP_* variables that name no option
  std::string device_auto_why;             // --device auto: what this rank found ("1 GPU visible", ...)
  std::string layout_auto_why;             // --layout auto: which case chose it, for the log (empty when set)
};

enum class ParseOutcome { Run, Exit };

// Parses argv (and the environment); throws InputError naming the bad flag or
// variable. Returns Exit after printing --help or --version.
ParseOutcome parse_train_options(int argc, char** argv, TrainConfig& config);

// The checks between options parse_train_options runs (option_checks.cpp),
// once all sources are merged, never on one environment variable alone
// (LOCKSTEP_CHECKPOINT_EVERY needs the directory that LOCKSTEP_CHECKPOINT_DIR
// or --checkpoint-dir gives); --device auto is resolved by then.
void check_option_combinations(const TrainConfig& config);

// What parse_train_options appends to `message`, an error of its checks
// between options, when --device auto's choice caused it (the message names
// the device or the GPU, and the other device does not fail the same way):
// "; --device auto chose the GPU: 1 GPU visible". Empty when the device was
// given or does not matter.
std::string auto_device_note(const TrainConfig& config, const std::string& message);

// Checks that need the filesystem (data dir, output locations) before any
// work. Outputs, checkpoints and --load-weights are used by rank 0 only and
// checked only where `rank0` is true.
void validate_train_config(const TrainConfig& config, bool rank0);
// The checks themselves (option_paths.cpp); validate_train_config adds the
// LOCKSTEP_* variable that set a flag its error names.
void check_option_paths(const TrainConfig& config, bool rank0);

// "batch-size=64 [LOCKSTEP_BATCH_SIZE], epochs=2 [command line]": the options
// set, with where they were set ("all defaults" when none was); with
// `all`, then "; defaults: model=lenet, ..." for every other option.
std::string describe_settings(const TrainConfig& config, bool all = false);

// Every option as {"option": {"value": ..., "source": ...}}.
nlohmann::json settings_json(const TrainConfig& config);

// The configuration as JSON (stored in checkpoints).
std::string config_json(const TrainConfig& config);

// The augmentation of training batches --augment resolves to: None or
// CropFlip (auto: crop-flip for cifar10, none for the other data sets).
Augment augmentation(const TrainConfig& config);

}  // namespace lockstep
