// Trainer options: declaration, LOCKSTEP_* environment mapping, conversion
// with messages that name the flag, and validation (the filesystem checks
// themselves are in option_paths.cpp).
#include "options.h"

#include <cxxopts.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <typeinfo>

#include <unistd.h>

#include "build_id.h"
#include "core/blas_kernels.h"
#include "core/error.h"
#include "data/mnist.h"
#include "device_check.h"
#include "job_control.h"
#include "option_values.h"
#include "registry.h"

extern char** environ;

namespace lockstep {

int64_t to_int(const std::string& flag, const std::string& text) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  LS_CHECK_INPUT(ec == std::errc() && p == end && !text.empty(), "--{}: '{}' is not an integer", flag, text);
  return v;
}

float to_float(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const float v = std::strtof(text.c_str(), &end);
  LS_CHECK_INPUT(!text.empty() && end == text.c_str() + text.size() && errno == 0 && std::isfinite(v),
                 "--{}: '{}' is not a finite number", flag, text);
  return v;
}

namespace {

constexpr const char* kEnvPrefix = "LOCKSTEP_";
// LOCKSTEP_* variables that are not options: set by lockstep-run for its
// ranks, and by the kernel choice for the process it re-executes.
constexpr std::array<const char*, 3> kInternalVariables = {kRunControlVariable, kRunAttemptVariable,
                                                            kBlasChoiceVariable};

// "fusion-threshold-mb" -> "LOCKSTEP_FUSION_THRESHOLD_MB"
std::string env_name(const std::string& flag) {
  std::string s = kEnvPrefix;
  for (char c : flag) s += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::vector<int64_t> to_shape(const std::string& flag, const std::string& text) {
  std::vector<int64_t> dims;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    dims.push_back(to_int(flag, part));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return dims;
}

cxxopts::Options make_options() {
  TrainConfig d;  // defaults shown in --help
  cxxopts::Options o("trainer", "lockstep trainer: synchronous data-parallel training of the built-in models.\n"
                                "Every option can also be set as LOCKSTEP_<OPTION> (e.g. LOCKSTEP_BATCH_SIZE=256);\n"
                                "the command line wins.");
  auto s = [](const std::string& v) { return cxxopts::value<std::string>()->default_value(v); };
  auto f = [](float v) { return cxxopts::value<std::string>()->default_value(fmt::format("{}", v)); };
  std::string models;
  for (const auto& m : models::model_names()) models += (models.empty() ? "" : ", ") + m;
  o.add_options("model and data")
      ("model", "model: " + models, s(d.model))
      ("dataset", "fashion-mnist, mnist-format (any MNIST-style IDX directory), cifar10 (binary format), tokens "
       "(llm.c's token shards: --data-dir's *train*.bin and *val*.bin) or synthetic",
       s(std::string(name(d.dataset))))
      ("data-dir", "directory of the IDX files (cifar10: of data_batch_1.bin ... data_batch_5.bin, test_batch.bin)",
       s(kFashionMnistDir))
      ("augment", "training-batch augmentation: auto (crop-flip for cifar10, none otherwise), none, or crop-flip "
       "(random crop with 4-pixel zero padding, horizontal flip with p=0.5)", s(std::string(name(d.augment))))
      ("synthetic-shape", "synthetic sample shape C,H,W (default: the model's input, e.g. 1,28,28 for lenet)", s(""))
      ("synthetic-classes", "synthetic class count (default: the model's, e.g. 10)", s(""))
      ("synthetic-samples", "synthetic training samples (test: a sixth, at least one evaluation batch up to as many "
       "as for training; --benchmark: enough for the run)", s(std::to_string(d.synthetic_samples)))
      ("image-size", "height and width of synthetic and --benchmark samples (0 = the model's; an explicit "
       "--synthetic-shape wins)", s("0"))
      ("benchmark", "throughput benchmark: synthetic data shaped for --model, no evaluation, images/s and ms per step "
       "at the end (first 5 steps excluded)", cxxopts::value<bool>()->default_value("false"))
      ("benchmark-input", "--benchmark's batches: loader (each step's batch assembled by the loader and, on a GPU, "
       "copied to it, as in training) or fixed (one batch, made and placed on the device once, trained on every "
       "step, as Horovod's and our PyTorch benchmark scripts do)", s(std::string(name(d.benchmark_input))));
  o.add_options("schedule")
      ("epochs", "training epochs", s(std::to_string(d.epochs)))
      ("max-steps", "stop after this many optimizer steps (0 = no limit)", s("0"))
      ("batch-size", "samples per process per step", s(std::to_string(d.batch_size)))
      ("global-batch-size", "samples per step over all processes, split evenly (0 = batch-size x processes)", s("0"))
      ("eval-batch-size", "samples per process per evaluation batch (0 = the training batch per process, so "
       "evaluation needs no more memory than a training step)", s("0"))
      ("accumulate-steps", "backward passes (micro-batches) per optimizer step; --batch-size is per micro-batch",
       s(std::to_string(d.accumulate_steps)))
      ("target-accuracy", "stop after the first epoch whose test accuracy reaches this fraction (0 = off)", s("0"))
      ("no-eval", "skip evaluation (benchmarks)", cxxopts::value<bool>()->default_value("false"));
  o.add_options("optimisation")
      ("optimizer", "sgd, adam or adamw", s(std::string(name(d.optimizer))))
      ("lr", "base learning rate", f(d.lr))
      ("momentum", "SGD momentum", f(d.momentum))
      ("nesterov", "Nesterov momentum (SGD)", cxxopts::value<bool>()->default_value("false"))
      ("weight-decay", "weight decay (L2 for sgd/adam, decoupled for adamw)", f(d.weight_decay))
      ("lr-schedule", "constant, step or cosine", s(std::string(name(d.lr_schedule))))
      ("warmup-epochs", "linear learning-rate warmup (fractional epochs allowed)", f(d.warmup_epochs))
      ("lr-step-epochs", "step schedule: multiply by --lr-gamma every this many epochs", f(d.lr_step_epochs))
      ("lr-gamma", "step schedule decay factor", f(d.lr_gamma))
      ("lr-scaling", "none, or linear: the learning rate is --lr x global batch / --base-batch-size (Goyal et al.; "
       "--warmup-epochs then ramps from --lr)", s(std::string(name(d.lr_scaling))))
      ("base-batch-size", "the global batch --lr is meant for (--lr-scaling linear)",
       s(std::to_string(d.base_batch_size)))
      ("no-decay-bn-bias", "no weight decay on biases and batch-norm parameters",
       cxxopts::value<bool>()->default_value("false"))
      ("label-smoothing", "cross-entropy against (1 - eps) x one-hot + eps / classes; eps in [0, 1)",
       f(d.label_smoothing))
      ("clip-grad-norm", "clip the averaged gradient to this global L2 norm before each update, as PyTorch's "
       "clip_grad_norm_ (0 = off)", f(d.clip_grad_norm))
      ("seed", "seed for initialisation, shuffling and dropout", s(std::to_string(d.seed)));
  o.add_options("execution")
      ("threads", "compute threads per process (0 = cores / processes on this host)", s("0"))
      ("loader-threads", "threads assembling each batch: reading, synthesising, augmenting (0 = auto: 1 with "
       "--device cpu; with cuda, the host's cores per process minus 1, at most 4)", s("0"))
      ("device", "auto (the GPU when this machine has one, else the CPU), cpu or cuda", s(std::string(name(d.device))))
      ("comm", "GPU gradient averaging: auto (nccl when every local rank has a GPU of its own), nccl, or mpi "
       "(staged through pinned host memory; ranks may share a GPU)", s(std::string(name(d.comm))))
      ("precision", "fp32, bf16 or fp16 (GPU: 16-bit activations and tensor-core math, fp32 weights, gradients "
       "and gradient averaging; fp16 with dynamic loss scaling)", s(std::string(name(d.precision))))
      ("loss-scale", "fp16: the initial loss scale (halved on a step with inf/NaN gradients, which is skipped; "
       "doubled after --loss-scale-window finite steps)", f(d.loss_scale))
      ("loss-scale-window", "fp16: finite steps in a row before the loss scale doubles",
       s(std::to_string(d.loss_scale_window)))
      ("cuda-graph", "GPU: capture the training step (forward, backward, NCCL averaging, update) in a CUDA graph "
       "and replay it each step: one launch instead of one per kernel", cxxopts::value<bool>()->default_value("false"))
      ("layout", "memory order of 4-D activations: auto (nhwc for 16-bit precision on the GPU, else nchw), nchw, "
       "or nhwc (channels last, as GPU tensor cores read them); the same model, weights and checkpoints either way",
       s(std::string(name(d.layout))))
      ("conv-algorithm", "CPU: how NCHW convolutions run: auto (Winograd for 3x3 and 5x5 stride-1 layers with at "
       "least 16 channels, im2col + GEMM for the rest), im2col (every layer: the fewest roundings), or winograd "
       "(every layer Winograd can take)", s(std::string(name(d.conv_algorithm))))
      ("cudnn-benchmark", "GPU: choose each convolution's cuDNN algorithms by timing them (once per layer shape "
       "and batch size, as PyTorch's cudnn.benchmark) instead of by cuDNN's heuristics",
       cxxopts::value<bool>()->default_value("false"))
      ("cudnn-nondeterministic", "GPU: let convolutions use any cuDNN algorithm, also those that sum with atomics "
       "(as PyTorch does by default): sometimes faster, but results then vary in the last bits from run to run",
       cxxopts::value<bool>()->default_value("false"))
      ("cudnn-workspace-mb", "GPU: the most scratch memory one cuDNN convolution call may use (MiB); some fast "
       "algorithms (FFT) need gigabytes", s(std::to_string(d.cudnn_workspace_mb)))
      ("zero-stage", "0, or 1: shard the optimizer state over the ranks (ZeRO-1, as DeepSpeed's stage 1 and "
       "llm.c's -z 1): gradients are reduce-scattered, each rank updates its 1/N of the parameters with its 1/N of "
       "the state, then the parameters are allgathered. The same results as 0 (CPU path)",
       s(std::to_string(d.zero_stage)))
      ("grad-op", "how gradients combine over ranks: average or sum", s(std::string(name(d.grad_op))))
      ("fusion-threshold-mb", "largest gradient bucket reduced at once (MB)", f(d.fusion_threshold_mb))
      ("first-bucket-mb", "cap of the first gradient bucket, so communication starts early (MB)",
       f(d.first_bucket_mb))
      ("overlap",
       "auto, on or off: reduce gradient buckets during backward on a communication thread (on), or after backward "
       "(off; --zero-stage 1: and allgather parameters after the update, not during the next forward). auto: on with "
       "a GPU, when gradients cross hosts, and where this host has a core beyond its ranks' compute threads; off "
       "when those threads fill its cores (the communication thread would only compete with backward). Bitwise the "
       "same results either way",
       s(std::string(name(d.overlap))))
      ("no-overlap", "the same as --overlap off", cxxopts::value<bool>()->default_value("false"))
      ("sync-batchnorm", "batch norm layers normalise with the statistics of the whole global batch (all ranks) "
       "instead of each rank's own", cxxopts::value<bool>()->default_value("false"))
      ("hierarchical-allreduce", "auto, on or off: across hosts, sum the gradients within each host first, then "
       "along the hosts, so each host's link carries them about once each way instead of 2L(H-1)/H times (L ranks "
       "on each of H hosts); bitwise the same sums. Needs the ranks grouped by host (mpirun's default), at least 2 "
       "on each: auto uses it where they are, on also says when they are not",
       s(std::string(name(d.hierarchical_allreduce))))
      ("grad-compression", "gradients on the wire: none, fp16 or bf16", s(std::string(name(d.grad_compression))))
      ("collective-timeout", "seconds a collective may wait for other ranks before the job ends naming them (0 = no "
       "watchdog)", f(d.collective_timeout_s))
      ("check-replicas-every", "compare a checksum of every rank's parameters every this many steps and stop, naming "
       "the ranks that differ (0 = off)", s("0"))
      ("inject-fault", "for reliability tests: replica-drift@RANK:STEP changes one parameter on RANK after STEP; "
       "error@RANK:STEP throws an error there (RANK all: on every rank)", s(""));
  add_checkpoint_options(o, d);
  o.add_options("outputs")
      ("metrics-file", "write per-epoch metrics as JSON Lines to this file", s(""))
      ("tensorboard-dir", "write TensorBoard event files (scalars per step and per epoch) here (rank 0); "
       "created if missing", s(""))
      ("timeline", "write a Chrome trace per rank (PATH, or PATH with .rank<r> before the extension)", s(""))
      ("save-weights", "write the final weights (safetensors) to this file", s(""))
      ("load-weights", "start from these weights (safetensors)", s(""))
      ("progress", "progress bar: auto (on a terminal), on or off", s(std::string(name(d.progress))))
      ("log-level", "trace, debug, info, warn or error", s(d.log_level))
      ("log-all-ranks", "every rank logs at --log-level (default: rank 0 only; others warnings and errors)",
       cxxopts::value<bool>()->default_value("false"))
      ("h,help", "print this help")
      ("version", "print the version");
  add_sequence_options(o, d);
  return o;
}

constexpr std::initializer_list<const char*> kGroups = {"model and data", "schedule",    "optimisation",
                                                         "execution",      "checkpoints", "outputs"};

// Long names in --help order: every trainer option (not help and version),
// or with `switches` every switch (help and version among them).
std::vector<std::string> option_flags(const cxxopts::Options& options, bool switches = false) {
  std::vector<std::string> flags;
  for (const char* group : kGroups)
    for (const auto& opt : options.group_help(group).options) {
      if (opt.l.empty()) continue;
      const std::string& name = opt.l.front();
      if (switches ? opt.is_boolean : name != "help" && name != "version") flags.push_back(name);
    }
  return flags;
}

// LOCKSTEP_* variables that name an option, as "--flag=value" arguments;
// the names of those that name none go to `unknown`.
struct EnvArgument {
  std::string flag, variable, argument;
};
std::vector<EnvArgument> env_arguments(const std::vector<std::string>& flags, std::vector<std::string>& unknown) {
  std::vector<EnvArgument> args;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    if (kv.rfind(kEnvPrefix, 0) != 0) continue;
    const std::string name = kv.substr(0, kv.find('='));
    if (std::find(kInternalVariables.begin(), kInternalVariables.end(), name) != kInternalVariables.end()) continue;
    const std::string value = kv.substr(kv.find('=') + 1);
    bool known = false;
    for (const auto& flag : flags) {
      if (env_name(flag) != name) continue;
      args.push_back({flag, name, "--" + flag + "=" + value});
      known = true;
    }
    if (!known) unknown.push_back(name);
  }
  std::sort(unknown.begin(), unknown.end());
  return args;
}

// cxxopts quotes with typographic marks; error lines use plain ones.
std::string plain_quotes(std::string s) {
  for (const char* q : {"\u2018", "\u2019"}) {
    for (size_t p = s.find(q); p != std::string::npos; p = s.find(q)) s.replace(p, std::strlen(q), "'");
  }
  return s;
}

// cxxopts says only "Argument 'x' failed to parse" for a switch given a value
// it does not take (--cuda-graph=maybe): name the switch. Its own parser
// decides, so what it accepts and what is named always agree.
void name_bad_switch_value(const cxxopts::Options& options, const std::vector<const char*>& args) {
  const std::vector<std::string> switches = option_flags(options, true);
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string a = args[i];
    if (a == "--") break;
    const size_t eq = a.find('=');
    if (a.rfind("--", 0) != 0 || eq == std::string::npos) continue;
    const std::string flag = a.substr(2, eq - 2), value = a.substr(eq + 1);
    if (std::find(switches.begin(), switches.end(), flag) == switches.end()) continue;
    bool parsed = false;
    try {
      cxxopts::values::parse_value(value, parsed);
    } catch (const cxxopts::exceptions::exception&) {
      LS_INPUT_ERROR("--{}: '{}' is not a switch value (true or false, 1 or 0)", flag, value);
    }
  }
}

cxxopts::ParseResult parse_args(cxxopts::Options& options, const std::vector<const char*>& args) {
  try {
    return options.parse(static_cast<int>(args.size()), args.data());
  } catch (const cxxopts::exceptions::incorrect_argument_type& e) {
    name_bad_switch_value(options, args);
    LS_INPUT_ERROR("{}", plain_quotes(e.what()));
  } catch (const cxxopts::exceptions::exception& e) {
    LS_INPUT_ERROR("{}", plain_quotes(e.what()));
  }
}

void convert(const cxxopts::ParseResult& r, TrainConfig& c);

// The variables (of (flag, variable) pairs) whose "--flag" an error message
// names, comma-separated; empty if none.
std::string variables_behind(const std::string& m, const std::vector<std::pair<std::string, std::string>>& flag_variables) {
  std::string from;
  for (const auto& [flag, variable] : flag_variables) {
    const std::string f = "--" + flag;
    for (size_t p = m.find(f); p != std::string::npos; p = m.find(f, p + 1)) {
      const size_t end = p + f.size();
      if (end < m.size() && (std::isalnum(static_cast<unsigned char>(m[end])) || m[end] == '-')) continue;
      from += (from.empty() ? "" : ", ") + variable;
      break;
    }
  }
  return from;
}

// An option's value as text: strings as they are, switches as true/false.
std::string value_text(const cxxopts::ParseResult& r, const std::string& flag) {
  try {
    return r[flag].as<std::string>();
  } catch (const std::bad_cast&) {
    return r[flag].as<bool>() ? "true" : "false";
  }
}

}  // namespace

ParseOutcome parse_train_options(int argc, char** argv, TrainConfig& c) {
  cxxopts::Options options = make_options();
  const std::vector<std::string> flags = option_flags(options);
  std::vector<std::string> unknown_env;
  const std::vector<EnvArgument> env_args = env_arguments(flags, unknown_env);
  // Each environment value is converted on its own first, so errors name the variable.
  for (const EnvArgument& e : env_args) {
    try {
      cxxopts::Options probe = make_options();
      TrainConfig scratch;
      convert(parse_args(probe, {"trainer", e.argument.c_str()}), scratch);
    } catch (const InputError& err) {
      LS_INPUT_ERROR("{}={}: {}", e.variable, e.argument.substr(e.argument.find('=') + 1), err.message());
    }
  }
  std::vector<const char*> args{argv[0]};
  for (const auto& e : env_args) args.push_back(e.argument.c_str());
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);  // after the environment: the command line wins

  const cxxopts::ParseResult r = parse_args(options, args);
  if (r.count("help")) {
    std::cout << options.help(std::vector<std::string>(kGroups.begin(), kGroups.end())) << std::endl;
    return ParseOutcome::Exit;
  }
  if (r.count("version")) {
    std::cout << "lockstep " << build_id() << std::endl;
    return ParseOutcome::Exit;
  }
  LS_CHECK_INPUT(r.unmatched().empty(), "unexpected argument '{}'", r.unmatched().front());
  convert(r, c);
  if (c.device == DeviceKind::Auto) {  // this rank's choice; the preflight check compares every rank's
    AutoDevice a = choose_auto_device();
    c.device = std::move(a.device);
    c.device_auto_why = std::move(a.why);
  }
  if (c.layout == LayoutChoice::Auto) {  // follows from the device and the precision, so after the device's choice
    AutoLayout a = choose_auto_layout(c.device, c.precision);
    c.layout = a.layout;
    c.layout_auto_why = std::move(a.why);
  }
  try {
    check_option_combinations(c);
  } catch (const InputError& err) {  // name the variables behind the options the message names
    std::vector<std::pair<std::string, std::string>> flag_variables;
    for (const EnvArgument& e : env_args) flag_variables.emplace_back(e.flag, e.variable);
    const std::string from = variables_behind(err.message(), flag_variables);
    std::string message = from.empty() ? err.message() : fmt::format("{} (set by {})", err.message(), from);
    message += auto_device_note(c, err.message());
    if (message == err.message()) throw;
    LS_INPUT_ERROR("{}", message);
  }

  // Provenance: the command line alone says which options it set.
  cxxopts::Options cli_options = make_options();
  const cxxopts::ParseResult cli = parse_args(cli_options, std::vector<const char*>(argv, argv + argc));
  c.settings.clear();
  for (const auto& flag : flags) {
    OptionSetting s{flag, value_text(r, flag), "default"};
    for (const EnvArgument& e : env_args)
      if (e.flag == flag) s.source = e.variable;
    if (cli.count(flag)) s.source = s.source == "default" ? "command line" : "command line, over " + s.source;
    c.settings.push_back(std::move(s));
  }
  c.unknown_env = std::move(unknown_env);
  return ParseOutcome::Run;
}

namespace {

void convert(const cxxopts::ParseResult& r, TrainConfig& c) {
  auto str = [&](const char* k) { return r[k].as<std::string>(); };
  auto i64 = [&](const char* k) { return to_int(k, str(k)); };
  auto flt = [&](const char* k) { return to_float(k, str(k)); };
  auto positive = [&](const char* k) {
    const int64_t v = i64(k);
    LS_CHECK_INPUT(v > 0, "--{}: {} must be positive", k, v);
    return v;
  };
  auto non_negative = [&](const char* k) {
    const int64_t v = i64(k);
    LS_CHECK_INPUT(v >= 0, "--{}: {} must not be negative", k, v);
    return v;
  };

  c.model = str("model");
  const std::vector<std::string> known = models::model_names();
  LS_CHECK_INPUT(std::find(known.begin(), known.end(), c.model) != known.end(), "--model: '{}' is unknown (known: {})",
                 c.model, fmt::join(known, ", "));
  c.dataset = parse_choice("dataset", str("dataset"), {DatasetKind::FashionMnist, DatasetKind::MnistFormat,
                                                        DatasetKind::Cifar10, DatasetKind::Synthetic,
                                                        DatasetKind::Tokens});
  c.data_dir = str("data-dir");
  c.augment = parse_choice("augment", str("augment"), {Augment::Auto, Augment::None, Augment::CropFlip});
  // Synthetic samples take the model's input shape and class count unless
  // given; --image-size sets H and W of that default shape.
  const models::ModelInfo& info = models::model_info(c.model);
  constexpr int64_t kMaxSample = 1 << 24;
  c.image_size = non_negative("image-size");
  if (info.tokens) {  // synthetic data is random tokens, shaped by --seq-len and --vocab-size
    LS_CHECK_INPUT(!r.count("synthetic-shape") && !r.count("synthetic-classes") && c.image_size == 0,
                   "--model {} reads token sequences: --synthetic-shape, --synthetic-classes and --image-size shape "
                   "images (--seq-len and --vocab-size shape its synthetic tokens)", c.model);
    c.synthetic_shape.clear();
  } else if (r.count("synthetic-shape")) {
    c.synthetic_shape = to_shape("synthetic-shape", str("synthetic-shape"));
  } else {
    c.synthetic_shape = {info.default_shape[0], info.default_shape[1], info.default_shape[2]};
    if (c.image_size > 0) {
      const int64_t channels = c.synthetic_shape[0];
      LS_CHECK_INPUT(c.image_size <= 4096 && channels * c.image_size * c.image_size <= kMaxSample,
                     "--image-size: {} makes {} x {} x {} values per sample, more than {}", c.image_size, channels,
                     c.image_size, c.image_size, kMaxSample);
      c.synthetic_shape[1] = c.synthetic_shape[2] = c.image_size;
    }
  }
  // Each product is checked before the next, so none can overflow.
  const auto& shape = c.synthetic_shape;
  LS_CHECK_INPUT(info.tokens || (shape.size() == 3 && shape[0] > 0 && shape[1] > 0 && shape[2] > 0 &&
                                 shape[0] <= kMaxSample && shape[1] <= kMaxSample && shape[2] <= kMaxSample &&
                                 shape[0] * shape[1] <= kMaxSample && shape[0] * shape[1] * shape[2] <= kMaxSample),
                 "--synthetic-shape: '{}' must be three positive extents C,H,W", str("synthetic-shape"));
  c.synthetic_classes = r.count("synthetic-classes") ? i64("synthetic-classes") : info.default_classes;
  LS_CHECK_INPUT(info.tokens || (c.synthetic_classes >= 2 && c.synthetic_classes <= 100000),
                 "--synthetic-classes: {} must be in [2, 100000]", c.synthetic_classes);
  c.synthetic_samples = positive("synthetic-samples");
  // --benchmark: synthetic data unless --dataset says otherwise (check_option_combinations
  // refuses that), no evaluation, samples for the run's steps unless given.
  c.benchmark = r["benchmark"].as<bool>();
  if (c.benchmark && !r.count("dataset")) c.dataset = DatasetKind::Synthetic;
  if (c.benchmark && !r.count("synthetic-samples")) c.synthetic_samples = 0;
  c.benchmark_input =
      parse_choice("benchmark-input", str("benchmark-input"), {BenchmarkInput::Loader, BenchmarkInput::Fixed});
  c.epochs = positive("epochs");
  c.max_steps = non_negative("max-steps");
  c.batch_size = positive("batch-size");
  c.global_batch_size = non_negative("global-batch-size");
  c.eval_batch_size = non_negative("eval-batch-size");
  c.target_accuracy = flt("target-accuracy");
  c.eval = !r["no-eval"].as<bool>() && !c.benchmark;
  // Range checks before narrowing to int, so 4294967297 is refused, not read as 1.
  const int64_t accumulate = positive("accumulate-steps");
  LS_CHECK_INPUT(accumulate <= 4096, "--accumulate-steps: {} is more than 4096", accumulate);
  c.accumulate_steps = static_cast<int>(accumulate);
  LS_CHECK_INPUT(c.target_accuracy >= 0.f && c.target_accuracy <= 1.f, "--target-accuracy: {} must be in [0, 1]",
                 c.target_accuracy);
  c.optimizer =
      parse_choice("optimizer", str("optimizer"), {OptimizerKind::Sgd, OptimizerKind::Adam, OptimizerKind::AdamW});
  c.lr = flt("lr");
  LS_CHECK_INPUT(c.lr > 0.f, "--lr: {} must be positive", c.lr);
  c.momentum = flt("momentum");
  LS_CHECK_INPUT(c.momentum >= 0.f && c.momentum < 1.f, "--momentum: {} must be in [0, 1)", c.momentum);
  c.nesterov = r["nesterov"].as<bool>();
  c.weight_decay = flt("weight-decay");
  LS_CHECK_INPUT(c.weight_decay >= 0.f, "--weight-decay: {} must not be negative", c.weight_decay);
  c.lr_schedule = parse_choice("lr-schedule", str("lr-schedule"),
                               {LrScheduleKind::Constant, LrScheduleKind::Step, LrScheduleKind::Cosine});
  c.warmup_epochs = flt("warmup-epochs");
  LS_CHECK_INPUT(c.warmup_epochs >= 0.f, "--warmup-epochs: {} must not be negative", c.warmup_epochs);
  c.lr_step_epochs = flt("lr-step-epochs");
  LS_CHECK_INPUT(c.lr_step_epochs >= 0.f, "--lr-step-epochs: {} must not be negative", c.lr_step_epochs);
  c.lr_gamma = flt("lr-gamma");
  LS_CHECK_INPUT(c.lr_gamma > 0.f && c.lr_gamma <= 1.f, "--lr-gamma: {} must be in (0, 1]", c.lr_gamma);
  c.lr_scaling = parse_choice("lr-scaling", str("lr-scaling"), {LrScaling::None, LrScaling::Linear});
  c.base_batch_size = positive("base-batch-size");
  c.decay_bn_bias = !r["no-decay-bn-bias"].as<bool>();
  c.label_smoothing = flt("label-smoothing");
  LS_CHECK_INPUT(c.label_smoothing >= 0.f && c.label_smoothing < 1.f, "--label-smoothing: {} must be in [0, 1)",
                 c.label_smoothing);
  c.clip_grad_norm = flt("clip-grad-norm");
  LS_CHECK_INPUT(c.clip_grad_norm >= 0.f, "--clip-grad-norm: {} must not be negative", c.clip_grad_norm);
  c.seed = static_cast<uint64_t>(non_negative("seed"));
  const int64_t threads = non_negative("threads");
  LS_CHECK_INPUT(threads <= 1024, "--threads: {} is more than 1024", threads);
  c.threads = static_cast<int>(threads);
  const int64_t loader_threads = non_negative("loader-threads");
  LS_CHECK_INPUT(loader_threads <= 64, "--loader-threads: {} is more than 64", loader_threads);
  c.loader_threads = static_cast<int>(loader_threads);
  c.device = parse_choice("device", str("device"), {DeviceKind::Auto, DeviceKind::Cpu, DeviceKind::Cuda});
  c.comm = parse_choice("comm", str("comm"), {GpuComm::Auto, GpuComm::Nccl, GpuComm::Mpi});
  c.precision = parse_choice("precision", str("precision"), {Precision::F32, Precision::BF16, Precision::F16});
  c.loss_scale = flt("loss-scale");
  LS_CHECK_INPUT(c.loss_scale >= 1.f && c.loss_scale <= 16777216.f, "--loss-scale: {} must be from 1 to 2^24",
                 c.loss_scale);
  const int64_t window = positive("loss-scale-window");
  LS_CHECK_INPUT(window <= 1000000, "--loss-scale-window: {} is more than 1000000", window);
  c.loss_scale_window = static_cast<int>(window);
  c.cuda_graph = r["cuda-graph"].as<bool>();
  c.cudnn_benchmark = r["cudnn-benchmark"].as<bool>();
  c.cudnn_deterministic = !r["cudnn-nondeterministic"].as<bool>();
  c.cudnn_workspace_mb = positive("cudnn-workspace-mb");
  LS_CHECK_INPUT(c.cudnn_workspace_mb <= 1048576, "--cudnn-workspace-mb: {} is more than 1048576 (1 TiB)",
                 c.cudnn_workspace_mb);
  c.layout = parse_choice("layout", str("layout"), {LayoutChoice::Auto, LayoutChoice::Nchw, LayoutChoice::Nhwc});
  c.conv_algorithm = parse_choice("conv-algorithm", str("conv-algorithm"),
                                  {ConvAlgorithm::Auto, ConvAlgorithm::Im2col, ConvAlgorithm::Winograd});
  c.zero_stage = std::stoi(one_of("zero-stage", str("zero-stage"), {"0", "1"}));
  c.grad_op = parse_choice("grad-op", str("grad-op"), {GradOp::Average, GradOp::Sum});
  c.fusion_threshold_mb = flt("fusion-threshold-mb");
  LS_CHECK_INPUT(c.fusion_threshold_mb > 0.f && c.fusion_threshold_mb <= 4096.f,
                 "--fusion-threshold-mb: {} must be in (0, 4096]", c.fusion_threshold_mb);
  c.first_bucket_mb = flt("first-bucket-mb");
  LS_CHECK_INPUT(c.first_bucket_mb > 0.f && c.first_bucket_mb <= 4096.f, "--first-bucket-mb: {} must be in (0, 4096]",
                 c.first_bucket_mb);
  c.overlap = parse_choice("overlap", str("overlap"), {Switch::Auto, Switch::On, Switch::Off});
  if (r["no-overlap"].as<bool>()) {
    LS_CHECK_INPUT(c.overlap != Switch::On, "--no-overlap and --overlap on contradict each other");
    c.overlap = Switch::Off;
  }
  c.sync_batchnorm = r["sync-batchnorm"].as<bool>();
  c.hierarchical_allreduce =
      parse_choice("hierarchical-allreduce", str("hierarchical-allreduce"), {Switch::Auto, Switch::On, Switch::Off});
  c.collective_timeout_s = flt("collective-timeout");
  LS_CHECK_INPUT(c.collective_timeout_s == 0.f || (c.collective_timeout_s >= 1.f && c.collective_timeout_s <= 1e6f),
                 "--collective-timeout: {} must be 0 (off) or from 1 to 1000000 seconds", c.collective_timeout_s);
  c.grad_compression = parse_choice("grad-compression", str("grad-compression"),
                                    {GradCompression::None, GradCompression::F16, GradCompression::BF16});
  c.check_replicas_every = non_negative("check-replicas-every");
  c.inject_fault = str("inject-fault");
  if (!c.inject_fault.empty()) {
    const std::string& spec = c.inject_fault;
    const size_t at = spec.find('@'), colon = spec.find(':', at == std::string::npos ? 0 : at);
    const std::string kind = spec.substr(0, std::min(at, spec.size()));
    LS_CHECK_INPUT((kind == "replica-drift" || kind == "error") && at != std::string::npos &&
                       colon != std::string::npos,
                   "--inject-fault: '{}' is not replica-drift@RANK:STEP or error@RANK:STEP", spec);
    const std::string who = spec.substr(at + 1, colon - at - 1);
    c.inject_kind = kind;
    c.inject_every_rank = kind == "error" && who == "all";
    const int64_t rank = c.inject_every_rank ? 0 : to_int("inject-fault", who);
    const int64_t step = to_int("inject-fault", spec.substr(colon + 1));
    LS_CHECK_INPUT(rank >= 0 && rank < 65536 && step >= 1,
                   "--inject-fault: '{}' needs a rank >= 0{} and a step >= 1", spec,
                   kind == "error" ? " (or all)" : "");
    c.inject_rank = c.inject_every_rank ? -1 : static_cast<int>(rank);
    c.inject_step = step;
  }
  convert_checkpoint_options(r, c);
  c.metrics_file = str("metrics-file");
  c.tensorboard_dir = str("tensorboard-dir");
  c.timeline = str("timeline");
  c.save_weights = str("save-weights");
  c.load_weights = str("load-weights");
  c.progress = parse_choice("progress", str("progress"), {Switch::Auto, Switch::On, Switch::Off});
  c.log_level = one_of("log-level", str("log-level"), {"trace", "debug", "info", "warn", "error"});
  c.log_all_ranks = r["log-all-ranks"].as<bool>();
  convert_sequence_options(r, c);
}

}  // namespace

void validate_train_config(const TrainConfig& c, bool rank0) {
  try {
    check_option_paths(c, rank0);
  } catch (const InputError& err) {  // name the variable when one, not the command line, set the option
    std::vector<std::pair<std::string, std::string>> flag_variables;
    for (const OptionSetting& s : c.settings)
      if (s.source.rfind("LOCKSTEP_", 0) == 0) flag_variables.emplace_back(s.option, s.source);
    const std::string from = variables_behind(err.message(), flag_variables);
    if (from.empty()) throw;
    LS_INPUT_ERROR("{} (set by {})", err.message(), from);
  }
}

}  // namespace lockstep
