// Trainer: setup, start (state broadcast), the training loop (eager steps,
// or --cuda-graph steps), evaluation. What keeps the ranks in agreement
// (fingerprint, buffer sync, checkpoints, stop agreement, replica checks) is
// in trainer_state.cpp. The data order, dropout keys and batch arithmetic follow the
// contract in data/sampler.h, so a run at N ranks processes the same global
// batches as a run at 1.
#include "trainer.h"

#include <unistd.h>

#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "build_id.h"
#include "checkpoint/weights.h"
#include "core/blas_kernels.h"
#include "core/cpu.h"
#include "core/hash.h"
#include "data/augment.h"
#include "data/cifar10.h"
#include "data/gpt2_vocab.h"
#include "data/loader.h"
#include "data/mnist.h"
#include "data/synthetic.h"
#include "data/token_dataset.h"
#include "device_options.h"
#include "job_control.h"
#include "metrics.h"
#include "nn/loss.h"
#include "ops/conv/conv2d_cpu.h"
#include "ops/simd_level.h"
#include "optim/device_step.h"
#include "progress.h"
#include "recipe.h"
#include "reductions.h"
#include "sgemm_rate.h"
#include "registry.h"
#include "stop_signals.h"
#include "thread_counts.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// --benchmark without --synthetic-samples: epochs of this many steps, or of
// --max-steps / --epochs (rounded up), so the run has the steps asked for.
constexpr int64_t kBenchmarkStepsPerEpoch = 50;
int64_t benchmark_samples(const TrainConfig& c, int64_t global_batch) {
  const int64_t steps =
      c.max_steps > 0 ? c.max_steps / c.epochs + (c.max_steps % c.epochs != 0) : kBenchmarkStepsPerEpoch;
  LS_CHECK_INPUT(steps <= (int64_t{1} << 40) / global_batch,
                 "--benchmark: {} steps of {} samples per epoch are too many (give --synthetic-samples)", steps,
                 global_batch);
  return steps * global_batch;
}

// Steps between the GPU path's checks that the training loss is finite (each
// check waits for the GPU; the CPU path checks every step for free).
constexpr int64_t kGpuLossCheckEvery = 50;
// fp16: below this loss scale (2^-24, fp16's smallest subnormal) training has
// diverged -- the scale halves only on steps whose gradients are inf/NaN.
constexpr float kMinLossScale = 5.9604645e-8f;

}  // namespace

Trainer::Trainer(const TrainConfig& config, Communicator& comm, Logger log)
    : c_(config), comm_(comm), log_(std::move(log)) {
  build_id_ = build_id();
}

Trainer::~Trainer() = default;

void Trainer::setup() {
  const int world = comm_.size();
  const ThreadCounts tc = thread_counts(c_, comm_.local_size());
  threads_ = tc.compute;
  loader_threads_ = tc.loader;
  set_compute_threads(threads_);

  // Batches: --global-batch-size splits evenly over ranks and micro-batches;
  // otherwise --batch-size is the per-rank micro-batch (Horovod's convention).
  const int K = c_.accumulate_steps;
  global_batch_ = c_.global_batch_size > 0 ? c_.global_batch_size : c_.batch_size * world * K;
  LS_CHECK_INPUT(global_batch_ % (static_cast<int64_t>(world) * K) == 0,
                 "--global-batch-size {} does not split evenly over {} ranks x {} accumulation steps", global_batch_,
                 world, K);
  micro_batch_ = global_batch_ / world / K;
  // Not larger by default: the activation plan grows to the largest batch seen and stays (resnet50: 80 MB a sample).
  eval_batch_ = c_.eval_batch_size > 0 ? c_.eval_batch_size : micro_batch_;

  if (c_.dataset == DatasetKind::Tokens) {
    TokenSplits s = load_token_shards(c_.data_dir, c_.seq_len, c_.vocab_size);
    train_ = std::move(s.train);
    test_ = std::move(s.val);
  } else if (c_.dataset == DatasetKind::Synthetic && models::model_info(c_.model).tokens) {
    const int64_t windows = c_.synthetic_samples > 0 ? c_.synthetic_samples : benchmark_samples(c_, global_batch_);
    train_ = random_tokens("synthetic-train", windows, c_.seq_len, c_.vocab_size, c_.seed);
    test_ = random_tokens("synthetic-val", std::max(windows / 6, std::min(eval_batch_, windows)), c_.seq_len,
                          c_.vocab_size, c_.seed);
  } else if (c_.dataset == DatasetKind::Synthetic) {
    const Shape shape{c_.synthetic_shape[0], c_.synthetic_shape[1], c_.synthetic_shape[2]};
    const int64_t samples = c_.synthetic_samples > 0 ? c_.synthetic_samples : benchmark_samples(c_, global_batch_);
    train_ = std::make_unique<SyntheticDataset>("synthetic", shape, c_.synthetic_classes, samples, c_.seed);
    const int64_t test_size = std::max(samples / 6, std::min(eval_batch_, samples));  // a batch, if not huge
    test_ = std::make_unique<SyntheticDataset>("synthetic-test", shape, c_.synthetic_classes, test_size, c_.seed,
                                               samples);
  } else if (c_.dataset == DatasetKind::Cifar10) {
    Cifar10Splits s = load_cifar10(c_.data_dir);
    train_ = std::move(s.train);
    test_ = std::move(s.test);
  } else {
    MnistSplits s = load_mnist_format(c_.data_dir, std::string(name(c_.dataset)));
    train_ = std::move(s.train);
    test_ = std::move(s.test);
  }

  const models::ModelSpec spec{train_->sample_shape(), train_->num_classes(), c_.n_layer, c_.n_head, c_.n_embd};
  model_ = models::build_model(c_.model, spec, c_.seed);
  opt_ = make_optimizer(model_->params(), optimizer_config(c_));
  LS_CHECK(c_.layout != LayoutChoice::Auto, "--layout auto: not resolved (parse_train_options resolves it)");
  model_->net().set_layout(c_.layout == LayoutChoice::Nhwc ? Layout::NHWC : Layout::NCHW);
  model_->net().set_conv_algorithm(c_.conv_algorithm == ConvAlgorithm::Im2col     ? ops::ConvAlgo::Im2col
                                   : c_.conv_algorithm == ConvAlgorithm::Winograd ? ops::ConvAlgo::Winograd
                                                                                  : ops::ConvAlgo::Auto);
  if (c_.device == DeviceKind::Cuda) {  // parameters, gradients, buffers and optimizer state move to the GPU
    dev_ = std::make_unique<DeviceRuntime>(device_runtime_options(c_), comm_, log_);
    model_->to(dev_->device_allocator());
    opt_->use_gpu(dev_->gpu());
    // Mixed precision: the input is rounded to bf16/fp16 once; weights stay
    // fp32. fp16's updates follow the device's loss-scale decision.
    if (c_.precision == Precision::BF16) model_->net().set_compute_dtype(DType::BF16);
    if (c_.precision == Precision::F16) model_->net().set_compute_dtype(DType::F16);
    // fp16's loss scale, or a graph's device-side step scalars (--cuda-graph).
    if (dev_->device_step()) opt_->use_device_step(dev_->device_step()->state_dev());
  }
  try {
    sampler_ = std::make_unique<TrainSampler>(train_->size(), global_batch_, world, comm_.rank(), c_.seed, true, K);
  } catch (const OutOfMemory& e) {  // only a synthetic set can be that large
    LS_INPUT_ERROR("{}{}", c_.dataset == DatasetKind::Synthetic ? "--synthetic-samples: " : "", e.message());
  }
  // No batch larger than a rank's share of the test set: its buffers would hold nothing more.
  eval_batch_ = std::min(eval_batch_, std::max<int64_t>(1, (test_->size() + world - 1) / world));
  eval_sampler_ = std::make_unique<EvalSampler>(test_->size(), eval_batch_, world, comm_.rank());
  steps_per_epoch_ = sampler_->steps_per_epoch();
  total_steps_ = c_.max_steps > 0 ? std::min(c_.max_steps, c_.epochs * steps_per_epoch_) : c_.epochs * steps_per_epoch_;
  cadence_ = StepCadence(c_, comm_.rank(), total_steps_);
  epochs_ = (total_steps_ + steps_per_epoch_ - 1) / steps_per_epoch_;

  sched_ = make_lr_schedule(c_, global_batch_, steps_per_epoch_, total_steps_);  // --lr-scaling, warmup
  sched_.validate();

  if (rank0() && c_.sample_tokens > 0) read_vocabulary();
  if (!rank0()) return;  // rank 0 reads weights and checkpoints; start() broadcasts them
  if (c_.resume) {
    auto loaded = load_latest_checkpoint(c_.checkpoint_dir, *model_, *opt_,
                                         [&](const std::string& w) { log_->warn("{}", w); });
    if (loaded) {
      const CheckpointInfo& info = loaded->info;
      LS_CHECK_INPUT(info.global_batch == global_batch_,
                     "--resume: {} was written with global batch {}, this run uses {} (the data position would "
                     "not carry over)",
                     loaded->path, info.global_batch, global_batch_);
      LS_CHECK_INPUT(info.seed == c_.seed, "--resume: {} was written with --seed {}, this run uses {}", loaded->path,
                     info.seed, c_.seed);
      progress_ = info.progress;
      resumed_from_ = loaded->path;
      resumed_loss_scale_ = {info.loss_scale, info.loss_scale_good_steps, info.skipped_steps};
      return;
    }
  }
  if (!c_.load_weights.empty()) load_weights(c_.load_weights, *model_);
}

DistributedOptions Trainer::distributed_options() const {
  DistributedOptions o;
  o.average = c_.grad_op == GradOp::Average;
  o.bucket_bytes = static_cast<int64_t>(c_.fusion_threshold_mb * 1024.0 * 1024.0);
  o.first_bucket_bytes = static_cast<int64_t>(c_.first_bucket_mb * 1024.0 * 1024.0);
  o.overlap = overlap_.on;
  o.wire = c_.grad_compression == GradCompression::F16    ? WireType::F16
           : c_.grad_compression == GradCompression::BF16 ? WireType::BF16
                                                          : WireType::F32;
  o.timeline = timeline_.get();
  o.tracker = &tracker_;
  if (dev_) {
    o.gpu = &dev_->gpu();
    o.nccl = dev_->nccl();
    o.timeout_s = c_.collective_timeout_s;
    o.device_step = dev_->device_step();
  }
  o.max_grad_norm = c_.clip_grad_norm;
  o.zero_stage = c_.zero_stage;
  o.gather_during_forward = true;  // with --overlap: the net's parameter-wait hook and the waits below
  return o;
}

OverlapChoice Trainer::resolve_overlap() {
  const int world = comm_.size();
  OverlapSite site{dev_ != nullptr, world, comm_.nodes(), comm_.local_size(), threads_ * comm_.local_size(),
                   available_cores()};
  if (c_.overlap == Switch::Auto && !site.gpu && world > 1 && site.hosts == 1) {
    // Every rank is on this host: count their compute threads and the cores
    // their affinity masks allow, together ("threads:cpu,cpu,...").
    std::string mine = std::to_string(threads_) + ":";
    for (const int cpu : affinity_cpus()) mine += std::to_string(cpu) + ",";
    std::set<int> cpus;
    site.host_threads = 0;
    for (const std::string& s : allgather_strings(comm_, mine)) {
      const size_t colon = s.find(':');
      site.host_threads += std::stoi(s.substr(0, colon));
      for (size_t p = colon + 1, q; (q = s.find(',', p)) != std::string::npos; p = q + 1)
        cpus.insert(std::stoi(s.substr(p, q - p)));
    }
    site.host_cores = std::max<int>(1, static_cast<int>(cpus.size()));
  }
  return choose_overlap(c_.overlap, site);
}

void Trainer::start() {
  // Opened only now that setup succeeded everywhere: bad input leaves no trace file.
  if (!c_.timeline.empty())
    timeline_ = std::make_unique<Timeline>(timeline_path_for_rank(c_.timeline, comm_.rank(), comm_.size()),
                                           comm_.rank());
  // Collective: the distributed optimizer maps shared gradient memory when the
  // ranks share a host.
  if (dev_) dev_->connect(comm_);  // collective: the NCCL communicator (the NCCL transport)
  // Chosen before the distributed optimizer duplicates the communicator; the
  // same answer on every rank (the grouping is agreed when it is made). Only
  // an explicit "on" explains when it does not apply.
  if (c_.hierarchical_allreduce != Switch::Off) {
    std::string why_not;
    if (dev_ && dev_->transport() == GpuTransport::Nccl)
      why_not = "no effect with NCCL (it chooses its own algorithm across hosts)";
    else if (!comm_.set_hierarchical_allreduce(true))
      why_not = comm_.nodes() == 1 ? "not used: every rank is on one host (they sum through shared memory)"
                                   : "not used: it needs the ranks grouped by host, the same number (at least 2) on "
                                     "every host, host h holding ranks h*L to h*L+L-1";
    hierarchical_ = why_not.empty();
    if (!hierarchical_ && c_.hierarchical_allreduce == Switch::On)
      hierarchy_note_ = "--hierarchical-allreduce on: " + why_not;
  }
  overlap_ = resolve_overlap();  // collective with --overlap auto on one host
  dopt_ = std::make_unique<DistributedOptimizer>(*opt_, model_->params(), comm_, distributed_options());
  Sequential& net = model_->net();
  net.set_grad_ready_hook([this](int64_t end) { dopt_->on_gradients_ready(end); });
  // ZeRO-1: each layer waits for its parameters from the last step's allgather
  // (other readers of parameters wait for all of it); stage 0 has nothing to wait for.
  if (dopt_->sharded()) net.set_parameter_wait_hook([this](int64_t from) { dopt_->wait_parameters(from); });
  if (timeline_)
    net.set_layer_observer([this, &net](size_t layer, Sequential::Phase phase, auto t0, auto t1) {
      const bool fwd = phase == Sequential::Phase::Forward;
      timeline_->span(fmt::format("{} {} {}", fwd ? "forward" : "backward", layer, net.layer(layer).describe()),
                      fwd ? "forward" : "backward", Timeline::kCompute, t0, t1);
    });
  dopt_->broadcast_state(0);
  if (model_->buffers().padded_numel() > 0) {  // batch norm running statistics
    CollectiveScope scope(&tracker_, CollectiveKind::StateBroadcast);
    broadcast_via_host(comm_, model_->buffers().values(), 0);  // on a GPU: through the host
  }
  if (c_.sync_batchnorm && comm_.size() > 1)
    bn_sync_ = std::make_unique<CommStatsReducer>(comm_, tracker_, dev_ ? dev_->nccl() : nullptr);
  // Rank 0's progress and (fp16) resumed loss scale, to every rank.
  Tensor p = Tensor::zeros(Shape{6}, DType::I64);
  int64_t* v = p.data<int64_t>();
  v[0] = progress_.step;
  v[1] = progress_.epoch;
  v[2] = progress_.step_in_epoch;
  uint32_t scale_bits = 0;
  std::memcpy(&scale_bits, &resumed_loss_scale_.scale, 4);
  v[3] = scale_bits;
  v[4] = resumed_loss_scale_.good_steps;
  v[5] = resumed_loss_scale_.skipped;
  {
    CollectiveScope scope(&tracker_, CollectiveKind::StateBroadcast);
    comm_.broadcast(p, 0);
  }
  progress_ = {v[0], v[1], v[2]};
  scale_bits = static_cast<uint32_t>(v[3]);
  std::memcpy(&resumed_loss_scale_.scale, &scale_bits, 4);
  resumed_loss_scale_.good_steps = v[4];
  resumed_loss_scale_.skipped = v[5];
  // fp16, --cuda-graph or --clip-grad-norm: the device counts the updates
  // applied; they are the optimizer's (broadcast) step count. fp16 also
  // resumes its loss scale.
  if (dev_ && dev_->device_step()) {
    StepState st = dev_->device_step()->initial();
    if (c_.precision == Precision::F16 && resumed_loss_scale_.scale > 0.f) {
      st.scale = resumed_loss_scale_.scale;
      st.good_steps = static_cast<int32_t>(std::min<int64_t>(resumed_loss_scale_.good_steps, INT32_MAX));
      st.skipped = resumed_loss_scale_.skipped;
    }
    st.applied = opt_->steps();
    dev_->restore_step_state(st);
  }

  if (sequences() && !dev_) sgemm_gflops_ = measure_sgemm_gflops() * comm_.size();
  report_start();
}

EvalResult Trainer::evaluate() {
  sync_buffers();  // evaluation uses the running statistics: every rank's, averaged
  PrefetchLoader loader(*test_, eval_batch_, 3, dev_ ? dev_->host_allocator() : cpu_allocator(), loader_threads_);
  LossAccumulator acc;
  loader.begin(eval_sampler_->batches(), [&](int64_t k, std::vector<int64_t>& out) { eval_sampler_->indices(k, out); });
  for (int64_t k = 0; k < eval_sampler_->batches(); ++k) {
    const Batch& hb = loader.next();
    const Batch& b = dev_ ? dev_->upload(hb) : hb;
    const Tensor& logits = model_->net().forward(b.inputs, ForwardContext{false, c_.seed, k, 0, nullptr, gpu()});
    acc.add(logits, b.labels, 0.f, gpu());
  }
  Sums sums;
  sums.add(acc.read());
  const Sums all = sums.reduced(comm_, tracker_, CollectiveKind::Evaluation);
  return {all.mean_loss(), all.acc()};
}

void Trainer::check_loss(const LossAccumulator& train_loss) {
  // GPU: the read waits for the device, and the compute stream waits for the
  // previous step's NCCL work; wait for that first, bounded by the timeout,
  // so a lost peer ends the job instead of hanging the read.
  if (dev_) {
    dev_->wait_graph_steps();
    dopt_->drain();
  }
  const bool fp16 = c_.precision == Precision::F16;
  const double l = train_loss.read().loss_sum;
  LS_CHECK(std::isfinite(l), "training diverged: loss is {} {} step {} (try a smaller --lr{})", l,
           dev_ ? "by" : "at", progress_.step, fp16 ? ", or --precision bf16" : "");
  if (fp16) {  // a scale that keeps falling means every step is being skipped
    const StepState st = dev_->read_step_state();
    LS_CHECK(st.scale >= kMinLossScale,
             "training diverged: the fp16 loss scale fell to {} by step {} ({} steps skipped: the gradients are "
             "inf/NaN at any scale; try a smaller --lr)",
             st.scale, progress_.step, st.skipped);
  }
}

void Trainer::forward_backward(Sequential& net, const Batch& b, const ForwardContext& fctx, int micro,
                               LossAccumulator& train_loss, float batch_mean, bool check) {
  const Tensor& logits = net.forward(b.inputs, fctx);
  train_loss.add(logits, b.labels, c_.label_smoothing, gpu());
  if (check) check_loss(train_loss);
  Tensor dlogits = net.output_grad();
  DeviceStep* const scaler = dev_ ? dev_->device_step() : nullptr;  // fp16, --cuda-graph or --clip-grad-norm
  softmax_cross_entropy_backward(logits, b.labels, batch_mean, dlogits, c_.label_smoothing, gpu(),
                                 c_.precision == Precision::F16 ? scaler->scale_dev() : nullptr);
  dopt_->begin_backward(micro == c_.accumulate_steps - 1);  // buckets go out only during the last backward
  net.backward(BackwardContext{micro > 0, bn_sync_.get(), gpu()});
}

void Trainer::train_step(Sequential& net, PrefetchLoader& loader, LossAccumulator& train_loss, float batch_mean,
                         bool epoch_end) {
  const float lr = sched_.lr(progress_.step);
  // A non-finite loss makes the running sum non-finite: the CPU checks every
  // step; the GPU every kGpuLossCheckEvery steps and at the epoch's end (each
  // check waits for the device).
  const bool check = !dev_ || progress_.step % kGpuLossCheckEvery == 0 || epoch_end;
  if (c_.cuda_graph) {
    const Batch& b = next_batch(loader);
    // The learning rate and step counter go to device memory, where the
    // captured kernels read them (the optimizer through the step state,
    // dropout through the context); host values in a graph would be frozen.
    const DeviceRuntime::StepScalars sp = dev_->set_step(lr, progress_.step);
    dev_->device_step()->read_lr_from(sp.lr);
    ForwardContext fctx{true, c_.seed, progress_.step, sampler_->shard_offset(0), bn_sync_.get(), gpu()};
    fctx.step_dev = sp.step;
    // Queued work only, no host reads: the loss check follows the step.
    const auto how = dev_->run_step(b.inputs.raw_data(), [&] {
      forward_backward(net, b, fctx, 0, train_loss, batch_mean, false);
      dopt_->step(lr);
    });
    if (how == DeviceRuntime::StepRun::Replayed) train_loss.count_replayed(b.labels.numel());
    if (check) check_loss(train_loss);
    return;
  }
  for (int micro = 0; micro < c_.accumulate_steps; ++micro) {
    const auto t_wait = Clock::now();
    const Batch& b = next_batch(loader);
    if (timeline_) timeline_->span("data wait", "data", Timeline::kCompute, t_wait, Clock::now());
    const ForwardContext fctx{true, c_.seed, progress_.step, sampler_->shard_offset(micro), bn_sync_.get(), gpu()};
    forward_backward(net, b, fctx, micro, train_loss, batch_mean, check);
  }
  dopt_->step(lr);
}

void Trainer::inject_fault(StepCadence::Fault fault) {
  if (fault == StepCadence::Fault::Error) LS_THROW("fault injected: an error after step {}", progress_.step);
  if (fault != StepCadence::Fault::ReplicaDrift) return;
  if (dev_) dev_->wait_graph_steps();
  dopt_->wait_parameters();
  Tensor first = model_->params().values().slice(0, Shape{1});
  Tensor h = on_host(first);
  h.data<float>()[0] += 1e-3f;
  first.copy_from(h);
  log_->warn("fault injected: parameter 0 changed after step {}", progress_.step);
}

bool Trainer::stop_agreed(TrainSummary& sum, bool checkpointed) {
  if (!stop_source_ || (sum.stopped_by = agree_on_stop()) == 0) return false;
  if (!checkpointed) checkpoint();
  finish_checkpoints();  // the write on disk, or its failure reported
  // No rank exits before rank 0 has the checkpoint on disk: a launcher ends
  // the whole job at the first non-zero exit.
  if (comm_.size() > 1) {
    CollectiveScope scope(&tracker_, CollectiveKind::StepAgreement, 1);
    comm_.barrier();
  }
  return true;
}

TrainSummary Trainer::run() {
  try {
    return run_steps();
  } catch (const OutOfMemory& e) {  // the batch is what a user can change; say which and where it is set
    LS_INPUT_ERROR("{}, training {} at {} samples per process (--batch-size{}){}: a smaller batch needs less",
                   e.message(), c_.model, micro_batch_, c_.accumulate_steps > 1 ? " / --accumulate-steps" : "",
                   c_.eval ? fmt::format(", evaluating at {} (--eval-batch-size)", eval_batch_) : "");
  }
}

TrainSummary Trainer::run_steps() {
  const int world = comm_.size();
  const int K = c_.accumulate_steps;
  RunRecords records(rank0() ? c_.metrics_file : "", rank0() ? c_.tensorboard_dir : "", c_.resume);
  // First: every option's value and where it came from, and what the run made of them.
  records.write({{"type", "config"},
                 {"options", settings_json(c_)},
                 {"world_size", world},
                 {"threads", threads_},
                 {"loader_threads", loader_threads_},
                 {"overlap", overlap_.on},
                 {"blas_kernels", blas_kernels_in_use().describe()},
                 {"simd_clone", ops::simd_clone_level()}});
  PrefetchLoader loader(*train_, micro_batch_, 3, dev_ ? dev_->host_allocator() : cpu_allocator(), loader_threads_);
  const bool crop_flip = augmentation(c_) == Augment::CropFlip;  // training batches only; evaluate() never augments
  const bool progress_on =
      rank0() && (c_.progress == Switch::On ||
                  (c_.progress == Switch::Auto && isatty(STDOUT_FILENO) && !under_job_launcher()));
  ProgressBar bar(progress_on);
  Sequential& net = model_->net();

  TrainSummary sum;
  std::vector<double> step_seconds;  // each timed step's (after warm-up)
  const int64_t first_step = progress_.step;
  std::vector<double> train_times, test_times;
  std::vector<int64_t> epoch_numbers;
  const int epoch_digits = static_cast<int>(std::to_string(epochs_).size());
  // The mean over the step's targets: samples, or every position of each sequence.
  const float batch_mean = 1.f / static_cast<float>(micro_batch_ * K * train_->targets_per_sample());
  // On the GPU the sums stay on the device until read; one accumulator for the
  // whole run (reset each epoch), so a captured step's pointers into it hold.
  LossAccumulator train_loss;
  // A step's time since the last (each epoch's first: since the epoch began),
  // into the summary's figures or, for the first kWarmupSteps, its warm-up.
  Clock::time_point tick;
  const auto time_step = [&] {
    const auto now = Clock::now();
    const double data_wait = loader.take_wait_seconds();  // every step: the warm-up's waits are dropped
    if (progress_.step - first_step > kWarmupSteps || total_steps_ - first_step <= kWarmupSteps) {
      step_seconds.push_back(std::chrono::duration<double>(now - tick).count());
      sum.data_wait_seconds += data_wait;
      // With --cuda-graph the collectives run inside the replayed graph, out of
      // the host's sight: only eager and capture steps can be measured.
      if (!c_.cuda_graph || !dev_->last_step_replayed()) sum.comm_wait_seconds += dopt_->last_comm_wait_seconds();
    } else {
      sum.warmup_seconds += std::chrono::duration<double>(now - tick).count();
    }
    tick = now;
  };
  if (c_.benchmark_input == BenchmarkInput::Fixed) make_fixed_batch(loader);
  if (reports_) reports_->started(first_step, world, global_batch_, micro_batch_, K);

  while (progress_.step < total_steps_) {
    const int64_t epoch = progress_.epoch, s0 = progress_.step_in_epoch;
    const int64_t steps_now = std::min(steps_per_epoch_ - s0, total_steps_ - progress_.step);
    const std::string label = fmt::format("[{:>{}}/{}]", epoch + 1, epoch_digits, epochs_);
    // Augmentation is keyed by (seed, epoch, sample index), never by rank or
    // batch position, so every world size augments a sample alike.
    PrefetchLoader::Transform augment;
    if (crop_flip)
      augment = [this, epoch, shape = train_->sample_shape()](int64_t, std::span<const int64_t> idx, float* images) {
        crop_flip_batch(images, idx, shape, c_.seed, epoch);
      };
    if (!fixed_batch_.inputs.defined()) {
      loader.begin(
          steps_now * K,
          [&](int64_t k, std::vector<int64_t>& out) {
            sampler_->indices(epoch, s0 + k / K, out, static_cast<int>(k % K));
          },
          std::move(augment));
    }
    bar.start(label, steps_now);
    train_loss.reset();
    records.begin_epoch();
    double bar_loss = 0;
    const auto t_epoch = Clock::now();
    tick = t_epoch;
    for (int64_t s = 0; s < steps_now; ++s) {
      const bool last_of_epoch = s + 1 == steps_now;
      tracker_.set_step(progress_.step + 1);  // the step being worked on, counted from 1
      if (dev_) dev_->begin_step();
      train_step(net, loader, train_loss, batch_mean, last_of_epoch);
      ++progress_.step;
      const bool epoch_end = ++progress_.step_in_epoch == steps_per_epoch_;
      if (epoch_end) {
        ++progress_.epoch;
        progress_.step_in_epoch = 0;
      }
      // Between steps, every rank alike: injected faults, the replica check, a
      // checkpoint, then the stop agreement (SIGTERM, SLURM's SIGUSR1).
      const StepCadence::Due due = cadence_.after(progress_.step, epoch_end);
      inject_fault(due.fault);
      if (due.replica_check) check_replicas();
      if (dev_ && last_of_epoch) {  // the epoch's time includes its queued GPU work
        dev_->wait_graph_steps();   // NCCL first: bounded by the timeout, errors named
        dopt_->drain();
        dev_->synchronize();
      }
      time_step();
      // GPU memory: the timed steps' own peak from here (races, captures and first-step growth before).
      if (dev_ && progress_.step - first_step == kWarmupSteps) dev_->mark_steady_state();
      if (due.checkpoint) checkpoint();
      if (reports_) reports_->stepped(progress_.step);
      if (rank0() && progress_.step == first_step + 1 && !c_.restart_record.empty()) report_restart(first_step, records);
      if (stop_agreed(sum, due.checkpoint)) {
        bar.clear();
        break;
      }
      // Rank 0's running loss for the bar and TensorBoard (on the GPU each read waits).
      if ((progress_on || records.wants_steps()) && (!dev_ || s % kGpuLossCheckEvery == 0 || last_of_epoch)) {
        if (dev_) dev_->wait_graph_steps();
        const LossStats l = train_loss.read();
        bar_loss = l.count > 0 ? l.loss_sum / static_cast<double>(l.count) : 0.0;
        records.step(progress_.step, l, sched_.lr(progress_.step - 1),
                     c_.clip_grad_norm > 0.f && records.wants_steps() ? std::optional(clip_state().first)
                                                                       : std::nullopt);
      }
      bar.update(s + 1, bar_loss, static_cast<double>((s + 1) * micro_batch_ * K * world) / seconds_since(t_epoch),
                 last_of_epoch);
    }
    if (sum.stopped_by != 0) break;
    const double train_s = seconds_since(t_epoch);
    if (timeline_) timeline_->flush();
    Sums train;
    train.add(train_loss.read());
    const Sums tr = train.reduced(comm_, tracker_, CollectiveKind::Metrics);
    const auto t_test = Clock::now();
    const EvalResult test = c_.eval ? evaluate() : EvalResult{};
    // Evaluation may have grown buffers a captured step points into: capture again.
    if (c_.cuda_graph && c_.eval) dev_->invalidate_graphs();
    const double test_s = seconds_since(t_test);
    bar.clear();
    log_epoch(label, epoch, tr, test, train_s, test_s, first_step, records);
    train_times.push_back(train_s);
    test_times.push_back(test_s);
    epoch_numbers.push_back(epoch + 1);
    sum.train_seconds += train_s;
    sum.test_acc = test.acc;
    sum.test_loss = test.loss;
    sum.epochs = epoch + 1;
    if (c_.target_accuracy > 0.f && test.acc >= c_.target_accuracy) {
      log_->info("reached the target test accuracy {:.2f}% at epoch {}", 100.0 * c_.target_accuracy, epoch + 1);
      sum.reached_target = true;
      break;
    }
  }
  sum.steps = progress_.step;
  dopt_->wait_parameters();  // the last step's allgather (ZeRO-1), before anyone reads the weights
  finish_checkpoints();
  finish_run(sum, RunTally{train_times, test_times, epoch_numbers, step_seconds, first_step}, records);
  return sum;
}

}  // namespace lockstep
