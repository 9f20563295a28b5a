// Trainer: one process's part of a data-parallel training run.
//
//   setup()  local work only, no collectives: threads, data, model, optimizer;
//            on rank 0 also --load-weights and --resume. May throw InputError.
//   fingerprint()  what must agree across ranks (see preflight.h).
//   start()  collective: builds the distributed optimizer (shared gradient
//            memory among the ranks of a host), then rank 0's parameters,
//            optimizer state and progress go to every rank, so replicas start
//            identical.
//   run()    collective: the training loop. Every rank runs the same number of
//            steps; metrics are reduced over ranks; rank 0 alone logs at info,
//            writes metrics, checkpoints and weights. After every step the
//            ranks agree on stop requests (set_stop_source): if any rank has
//            one, all write a checkpoint and return early together.
// tracker() says where this rank is in the job's collectives (the watchdog
// reads it). With --check-replicas-every N, every N steps the ranks compare a
// checksum of their parameters (one min/max reduction); if they differ, run()
// throws ReplicasDiverged on every rank, naming the ranks that differ.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_writer.h"
#include "comm/collective_tracker.h"
#include "comm/communicator.h"
#include "core/logging.h"
#include "data/dataset.h"
#include "device/device_runtime.h"
#include "data/sampler.h"
#include "data/loader.h"
#include "nn/loss.h"
#include "nn/model.h"
#include "optim/distributed_optimizer.h"
#include "optim/schedule.h"
#include "options.h"
#include "preflight.h"
#include "profiling/timeline.h"
#include "step_cadence.h"
#include "thread_counts.h"

namespace lockstep {

class RunRecords;       // metrics.h
class LauncherReports;  // job_control.h
class Gpt2Vocab;   // data/gpt2_vocab.h
struct Sums;       // reductions.h

// Exit code when the replica guard finds ranks whose parameters differ.
constexpr int kExitReplicasDiverged = 4;

// Thrown on every rank at once (all see the same reduction), so the job can
// end without MPI_Abort; the message is the same on every rank.
struct ReplicasDiverged : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct TrainSummary {
  int64_t steps = 0;
  int64_t epochs = 0;
  double images_per_sec = 0;  // all ranks together, training only, after the first 5 steps
  double test_acc = 0;
  double test_loss = 0;
  double train_seconds = 0;
  double comm_wait_seconds = 0;  // step() waiting for gradient reduction, same steps as images_per_sec
  double data_wait_seconds = 0;  // the loop waiting for its next batch (PrefetchLoader::next), same steps
  double measured_seconds = 0;   // training time those figures cover
  double warmup_seconds = 0;     // the host time of the warm-up steps left out of them (GPU: cuDNN's searches
                                 // and races with --cudnn-benchmark, graph captures)
  bool reached_target = false;   // --target-accuracy reached (then training stopped early)
  int stopped_by = 0;            // the signal whose stop request ended training early (all ranks agreed), or 0
};

struct EvalResult {
  double loss = 0, acc = 0;
};

class Trainer {
 public:
  Trainer(const TrainConfig& config, Communicator& comm, Logger log);
  ~Trainer();

  void setup();
  Fingerprint fingerprint() const;
  void start();
  TrainSummary run();

  CollectiveTracker& tracker() { return tracker_; }
  // Polled at every step boundary: a non-zero value (a signal number) is a
  // request to checkpoint and stop.
  void set_stop_source(std::function<int()> source) { stop_source_ = std::move(source); }
  // Rank 0: where training starts and every step done go to lockstep-run
  // (job_control.h), which restarts failed jobs from them.
  void set_launcher_reports(LauncherReports* reports) { reports_ = reports; }

 private:
  EvalResult evaluate();
  void report_start();  // the start-up log lines (trainer_report.cpp)
  TrainSummary run_steps();  // run() but for naming the batch when memory runs out
  bool rank0() const { return comm_.rank() == 0; }
  // Collective: the state at this step handed to rank 0's CheckpointWriter
  // (--checkpoint-write), after the previous write's outcome is reported.
  void checkpoint();
  // Collective: waits for rank 0's write in flight and reports it; with
  // --checkpoint-failure stop, a failed write stops every rank with an error.
  void finish_checkpoints();
  int agree_on_stop();  // collective: the largest stop request of any rank
  void check_replicas();  // collective: throws ReplicasDiverged when parameters differ across ranks
  // Collective: every rank's buffers (batch norm running statistics, which each
  // rank updates from its own batches) replaced by their average, before
  // evaluation, checkpoints and saved weights.
  void sync_buffers();
  DistributedOptions distributed_options() const;
  // A non-finite training loss (fp16: a collapsed loss scale) stops training
  // with one clear error; on the GPU it waits for the device first (bounded).
  void check_loss(const LossAccumulator& train_loss);
  // --clip-grad-norm: the last update's gradient norm before clipping, and the
  // updates clipped since this process started (GPU: waits for the device).
  std::pair<double, int64_t> clip_state();
  // One optimizer step: the forward and backward of each of the
  // --accumulate-steps micro-batches, then the update; with --cuda-graph the
  // same step (one micro-batch) captured once through DeviceRuntime::run_step
  // and replayed. The loss is checked every step on the CPU, every
  // kGpuLossCheckEvery steps and at `epoch_end` on the GPU.
  void train_step(Sequential& net, PrefetchLoader& loader, LossAccumulator& train_loss, float batch_mean,
                  bool epoch_end);
  // Micro-batch `micro`'s forward, loss and backward (its gradients reduced
  // when it is the last); `check`: the loss checked before the backward.
  void forward_backward(Sequential& net, const Batch& b, const ForwardContext& fctx, int micro,
                        LossAccumulator& train_loss, float batch_mean, bool check);
  // --inject-fault, when the cadence says this rank's fault is due.
  void inject_fault(StepCadence::Fault fault);
  // Collective after every step with a stop source: true when some rank was
  // asked to stop (sum.stopped_by), after a checkpoint (unless `checkpointed`
  // already) that every rank waits for.
  bool stop_agreed(TrainSummary& sum, bool checkpointed);
  // The micro-step's batch: --benchmark-input fixed's one batch, or the
  // loader's next (on the GPU, its upload queued on the copy stream).
  const Batch& next_batch(PrefetchLoader& loader);
  // --benchmark-input fixed: the rank's first micro-batch of the run, made by
  // the loader once and kept on the device (memory from the device allocator),
  // as Horovod's synthetic benchmark and scripts/bench/torch_*.py hold theirs.
  void make_fixed_batch(PrefetchLoader& loader);
  cuda::Context* gpu() const { return dev_ ? &dev_->gpu() : nullptr; }
  // Warm-up steps excluded from the summary's images/s.
  static constexpr int64_t kWarmupSteps = 5;
  // --overlap for this job (collective with auto on one host: every rank's
  // threads and cores).
  OverlapChoice resolve_overlap();

  // What run() counted for the summary.
  struct RunTally {
    const std::vector<double>& train_seconds;  // per epoch
    const std::vector<double>& test_seconds;   // per epoch
    const std::vector<int64_t>& epochs;        // the epochs' numbers, from 1
    const std::vector<double>& step_seconds;   // each timed step's (after warm-up), in order
    int64_t first_step;                        // the step this run started from
  };
  // The end of a run that was not stopped (trainer_report.cpp): fills sum's
  // throughput, logs the summary lines and writes the summary record.
  void report(TrainSummary& sum, const RunTally& t, RunRecords& records);
  // After the loop: a stopped run's line and record; otherwise the replica
  // checks' line, report(), and --save-weights.
  void finish_run(TrainSummary& sum, const RunTally& tally, RunRecords& records);
  // Rank 0, after the first step of an attempt lockstep-run restarted
  // (--restart_record): the "restart" record, to the metrics file and
  // TensorBoard, with the seconds from the failure to this step.
  void report_restart(int64_t first_step, RunRecords& records);
  // An epoch's lines and records (trainer_report.cpp): its train and test
  // figures, fp16's loss scale, --clip-grad-norm's state.
  void log_epoch(const std::string& label, int64_t epoch, const Sums& tr, const EvalResult& test, double train_s,
                 double test_s, int64_t first_step, RunRecords& records);

  const TrainConfig& c_;
  Communicator& comm_;
  Logger log_;
  int threads_ = 1;
  int loader_threads_ = 1;  // PrefetchLoader workers (--loader-threads)
  OverlapChoice overlap_;   // --overlap, auto resolved in start() (thread_counts.h)
  int64_t global_batch_ = 0, micro_batch_ = 0, eval_batch_ = 0;
  int64_t steps_per_epoch_ = 0, total_steps_ = 0, epochs_ = 0;
  // --device cuda: the GPU context, streams and NCCL. Declared before every
  // member holding device memory or streams, so it is destroyed after them.
  std::unique_ptr<DeviceRuntime> dev_;
  std::unique_ptr<Dataset> train_, test_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> opt_;
  std::unique_ptr<DistributedOptimizer> dopt_;
  std::unique_ptr<CheckpointWriter> checkpoint_writer_;  // rank 0, from its first checkpoint
  int64_t failed_checkpoint_step_ = 0;                  // rank 0: the first write that failed
  std::unique_ptr<TrainSampler> sampler_;
  std::unique_ptr<EvalSampler> eval_sampler_;
  LrSchedule sched_;
  TrainingProgress progress_;
  std::optional<std::string> resumed_from_;  // rank 0: the checkpoint loaded
  struct ResumedLossScale {
    float scale = 0.f;  // 0: the checkpoint had none
    int64_t good_steps = 0, skipped = 0;
  } resumed_loss_scale_;  // rank 0, from the checkpoint; start() hands it to every rank
  Batch fixed_batch_;  // --benchmark-input fixed (undefined otherwise)
  std::unique_ptr<Timeline> timeline_;
  std::string build_id_;
  mutable CollectiveTracker tracker_;  // progress record (atomics), written from const paths too
  std::function<int()> stop_source_;
  LauncherReports* reports_ = nullptr;  // rank 0 under lockstep-run
  int64_t replica_checks_ = 0;  // passed so far
  StepCadence cadence_;         // what runs between steps (made in start())
  std::unique_ptr<StatsReducer> bn_sync_;  // --sync-batchnorm with more than one rank
  // Language models (token sequences): the job's sgemm rate, GFLOP/s (this
  // rank's measured x ranks; sgemm_rate.h), that MFU is held against. 0 on a GPU.
  double sgemm_gflops_ = 0;
  bool sequences() const { return train_->targets_per_sample() > 1; }
  // Model FLOPs of one trained token: forward x 3 (the backward's two products per forward one).
  double flops_per_token() const;
  // --sample-tokens (rank 0): GPT-2's vocabulary, read in setup() so a bad
  // file fails before training; the sample is logged at the end of run().
  std::unique_ptr<Gpt2Vocab> vocab_;
  std::vector<int32_t> prompt_tokens_;
  void read_vocabulary();  // vocab_ and prompt_tokens_
  void log_sample();
  bool hierarchical_ = false;              // gradients summed within hosts, then along them
  std::string hierarchy_note_;             // why --hierarchical-allreduce on does not apply (empty: it does)
};

}  // namespace lockstep
