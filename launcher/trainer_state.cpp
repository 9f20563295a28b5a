// Trainer: the work that keeps the ranks in agreement outside the step --
// the preflight fingerprint (what must match across ranks), the batch-norm
// buffer average, rank 0's checkpoints, the stop agreement and the replica
// check (trainer.h has the class; trainer.cpp the loop).
#include "trainer.h"

#include <unistd.h>

#include <map>

#include "core/hash.h"
#include "core/input_subject.h"
#include "device_options.h"
#include "optim/device_step.h"
#include "input_names.h"
#include "recipe.h"
#include "reductions.h"

namespace lockstep {
namespace {

std::string param_signature(const ParameterStore& params) {
  std::string sig;
  for (const auto& p : params.params()) sig += p.name + ":F32" + p.shape.str() + ";";
  return fmt::format("{} tensors, {} values, {:016x}", params.params().size(), params.numel(), fnv1a(sig));
}

}  // namespace

Fingerprint Trainer::fingerprint() const {
  return {
      {"lockstep", build_id_},
      {"model", c_.model},
      {"parameters", param_signature(model_->params())},
      {"buffers", param_signature(model_->buffers())},
      {"sync-batchnorm", c_.sync_batchnorm ? "on" : "off"},
      {"device", dev_ ? fmt::format("cuda, --comm {}", comm_name(dev_->transport())) : "cpu"},
      {"precision", c_.precision == Precision::F16 ? fmt::format("fp16, loss scale from {}, window {}", c_.loss_scale,
                                                         c_.loss_scale_window)
                                           : std::string(name(c_.precision))},
      {"dataset", fmt::format("{}: {} train / {} test samples of {}", name(c_.dataset), train_->size(), test_->size(),
                              train_->sample_shape().str())},
      {"augment", std::string(name(augmentation(c_)))},
      {"global batch", std::to_string(global_batch_)},
      {"micro-batch", std::to_string(micro_batch_)},
      {"accumulate-steps", std::to_string(c_.accumulate_steps)},
      {"steps", fmt::format("{} ({} per epoch)", total_steps_, steps_per_epoch_)},
      {"optimizer", opt_->describe()},
      {"lr", describe_lr(c_, global_batch_)},
      {"lr schedule", fmt::format("{}, warmup {} steps from {}, step every {} x {}", sched_.kind, sched_.warmup_steps,
                                  sched_.warmup_start_lr, sched_.step_every, sched_.gamma)},
      {"weight decay on", c_.decay_bn_bias ? "all parameters" : "weights only (--no-decay-bn-bias)"},
      {"label-smoothing", fmt::format("{}", c_.label_smoothing)},
      {"clip-grad-norm", fmt::format("{}", c_.clip_grad_norm)},
      {"seed", std::to_string(c_.seed)},
      {"zero-stage", std::to_string(c_.zero_stage)},
      {"grad-op", std::string(name(c_.grad_op))},
      {"grad-compression", std::string(name(c_.grad_compression))},
      {"hierarchical-allreduce", std::string(name(c_.hierarchical_allreduce))},
      {"cuda-graph", c_.cuda_graph ? "on" : "off"},
      {"conv-algorithm", std::string(name(c_.conv_algorithm))},
      {"cudnn-benchmark", c_.cudnn_benchmark ? "on" : "off"},
      {"cudnn algorithms", fmt::format("{}, workspace up to {} MiB per call",
                                       c_.cudnn_deterministic ? "deterministic only" : "any (--cudnn-nondeterministic)",
                                       c_.cudnn_workspace_mb)},
      {"buckets", fmt::format("{:.3f} MB cap (first {:.3f} MB), {} buckets", c_.fusion_threshold_mb,
                              c_.first_bucket_mb,
                              plan_buckets(model_->params(), distributed_options().bucket_bytes,
                                           distributed_options().first_bucket_bytes)
                                  .size())},
      {"target-accuracy", fmt::format("{}", c_.target_accuracy)},
      {"check-replicas-every", std::to_string(c_.check_replicas_every)},
      {"eval batch", std::to_string(eval_batch_)},
  };
}

void Trainer::sync_buffers() {
  if (dev_) dev_->wait_graph_steps();  // --cuda-graph: bounded, before the host copies below
  if (comm_.size() == 1 || model_->buffers().padded_numel() == 0) return;
  CollectiveScope scope(&tracker_, CollectiveKind::BufferSync);
  allreduce_via_host(comm_, model_->buffers().values(), ReduceOp::Average);
}

void Trainer::checkpoint() {
  if (c_.checkpoint_dir.empty()) return;
  finish_checkpoints();  // the previous write's outcome first; --checkpoint-failure stop ends here
  sync_buffers();  // collective: every rank checkpoints at the same step
  // The optimizer state in the whole layout (--zero-stage 1: assembled from
  // the ranks' shards, a collective).
  std::vector<std::pair<std::string, Tensor>> state = dopt_->gather_state();
  const bool background = c_.checkpoint_write == CheckpointWrite::Background;
  if (rank0()) {
    CheckpointInfo info;
    if (dev_ && dev_->device_step()) {  // fp16, --cuda-graph or clipping: the applied updates are the optimizer's step count
      dev_->wait_graph_steps();
      dopt_->drain();  // bounded waits for the NCCL work, so the read below cannot hang on a lost peer
      const StepState st = dev_->read_step_state();
      info.optimizer_steps = st.applied;
      if (c_.precision == Precision::F16) {
        info.loss_scale = st.scale;
        info.loss_scale_good_steps = st.good_steps;
        info.skipped_steps = st.skipped;
      }
    }
    info.progress = progress_;
    info.global_batch = global_batch_;
    info.seed = c_.seed;
    info.world_size = comm_.size();
    info.config_json = config_json(c_);
    CollectiveScope scope(&tracker_, CollectiveKind::Checkpoint);
    std::vector<std::pair<std::string, Tensor*>> views;
    for (auto& [name, t] : state) views.emplace_back(name, &t);
    if (!checkpoint_writer_) checkpoint_writer_ = std::make_unique<CheckpointWriter>(background);
    checkpoint_writer_->save(c_.checkpoint_dir, *model_, *opt_, info, c_.keep_checkpoints, views);
  }
  if (!background) finish_checkpoints();  // this write's outcome
}

void Trainer::finish_checkpoints() {
  if (c_.checkpoint_dir.empty()) return;
  const bool stop = c_.checkpoint_failure == CheckpointFailure::Stop;
  if (rank0() && checkpoint_writer_) {
    {
      CollectiveScope scope(&tracker_, CollectiveKind::Checkpoint);
      checkpoint_writer_->wait();
    }
    for (const CheckpointOutcome& o : checkpoint_writer_->take()) {
      if (o.ok()) {
        if (checkpoint_writer_->background())
          log_->debug("checkpoint {} written in {:.3f} s while training went on (state copied in {:.3f} s)", o.path,
                      o.seconds, o.copy_seconds);
        else
          log_->debug("checkpoint {} written in {:.3f} s", o.path, o.seconds);
        continue;
      }
      const std::string why = o.subject.empty() ? o.error : flag_for_subject(o.subject) + o.error.substr(o.subject.size());
      const std::vector<std::string> kept = list_checkpoints(c_.checkpoint_dir);
      log_->warn("checkpoint of step {} not written: {}; {}", o.step, why,
                 stop ? std::string("stopping (--checkpoint-failure stop)")
                      : fmt::format("training goes on (--checkpoint-failure continue), the newest checkpoint is {}",
                                    kept.empty() ? std::string("none") : kept.front()));
      if (failed_checkpoint_step_ == 0) failed_checkpoint_step_ = o.step;
    }
  }
  if (!stop) return;
  int64_t failed = rank0() ? failed_checkpoint_step_ : 0;
  if (comm_.size() > 1) {  // every rank learns of rank 0's failure
    CollectiveScope scope(&tracker_, CollectiveKind::StepAgreement);
    Tensor t = Tensor::zeros(Shape{1}, DType::I64);
    t.data<int64_t>()[0] = failed;
    comm_.allreduce(t, ReduceOp::Max);
    failed = t.data<int64_t>()[0];
  }
  // An input error (exit 2): the directory cannot take the checkpoints, and a
  // restart would meet the same disk.
  if (failed > 0)
    LS_INPUT_ERROR_ON(subject::kCheckpointDirectory, ": the checkpoint of step {} could not be written (rank 0 warned "
                      "why); stopping, as --checkpoint-failure stop asks", failed);
}

int Trainer::agree_on_stop() {
  const int mine = stop_source_();
  if (comm_.size() == 1) return mine;
  CollectiveScope scope(&tracker_, CollectiveKind::StepAgreement);
  Tensor t = Tensor::zeros(Shape{1}, DType::I32);
  t.data<int32_t>()[0] = mine;
  comm_.allreduce(t, ReduceOp::Max);
  return t.data<int32_t>()[0];
}

void Trainer::check_replicas() {
  if (dev_) dev_->wait_graph_steps();  // --cuda-graph: bounded, before the host copy below
  dopt_->wait_parameters();            // --zero-stage 1: the allgather under way
  ParameterStore& params = model_->params();
  const Tensor values = on_host(params.values());
  const uint64_t mine = hash_bytes(values.data<float>(), static_cast<size_t>(params.padded_numel()) * 4);
  if (comm_.size() == 1) return;
  // One reduction gives min and max: max(h) and max(~h) = ~min(h).
  Tensor t = Tensor::zeros(Shape{2}, DType::I64);
  t.data<int64_t>()[0] = static_cast<int64_t>(mine);
  t.data<int64_t>()[1] = ~static_cast<int64_t>(mine);
  {
    CollectiveScope scope(&tracker_, CollectiveKind::ReplicaCheck);
    comm_.allreduce(t, ReduceOp::Max);
  }
  if (t.data<int64_t>()[0] == ~t.data<int64_t>()[1]) {
    ++replica_checks_;
    return;
  }
  // They differ: every rank is here. Learn who holds what (one allgather), take
  // the largest group (rank 0's on a tie) as the reference, name the others.
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  const auto all = allgather_strings(comm_, fmt::format("{:016x}\thost {}, pid {}", mine, host, getpid()));
  std::map<std::string, std::vector<int>> groups;  // checksum -> ranks
  for (int r = 0; r < static_cast<int>(all.size()); ++r) groups[all[r].substr(0, 16)].push_back(r);
  std::string reference = all[0].substr(0, 16);
  for (const auto& [sum, ranks] : groups)
    if (ranks.size() > groups[reference].size()) reference = sum;
  std::vector<std::string> named;
  for (int r = 0; r < static_cast<int>(all.size()); ++r)
    if (all[r].substr(0, 16) != reference)
      named.push_back(fmt::format("rank {} ({}) has parameter checksum {}", r, all[r].substr(17), all[r].substr(0, 16)));
  throw ReplicasDiverged(fmt::format(
      "replicas diverged after step {}: {}; ranks {} have {} (--check-replicas-every {})", progress_.step,
      fmt::join(named, "; "), format_ranks(groups[reference]), reference, c_.check_replicas_every));
}

}  // namespace lockstep
