// Training loop. One process for now; the data order, dropout keys and batch
// arithmetic already follow the distributed contract in data/sampler.h.
#include "train_loop.h"

#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <memory>

#include "checkpoint/weights.h"
#include "core/cpu.h"
#include "data/loader.h"
#include "data/mnist.h"
#include "data/sampler.h"
#include "data/synthetic.h"
#include "metrics.h"
#include "nn/loss.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "progress.h"
#include "registry.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Warm-up steps excluded from the summary's images/s.
constexpr int64_t kWarmupSteps = 5;

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

struct Data {
  std::unique_ptr<Dataset> train, test;
};

Data load_data(const TrainConfig& c, int64_t eval_batch) {
  Data d;
  if (c.dataset == "synthetic") {
    const Shape shape{c.synthetic_shape[0], c.synthetic_shape[1], c.synthetic_shape[2]};
    d.train = std::make_unique<SyntheticDataset>("synthetic", shape, c.synthetic_classes, c.synthetic_samples, c.seed);
    const int64_t test_size = std::max(c.synthetic_samples / 6, eval_batch);
    d.test = std::make_unique<SyntheticDataset>("synthetic-test", shape, c.synthetic_classes, test_size, c.seed,
                                                c.synthetic_samples);
  } else {
    MnistSplits s = load_mnist_format(c.data_dir, c.dataset);
    d.train = std::move(s.train);
    d.test = std::move(s.test);
  }
  return d;
}

struct EpochStats {
  double loss_sum = 0;
  int64_t correct = 0, count = 0;
  void add(const LossStats& s) {
    loss_sum += s.loss_sum;
    correct += s.correct;
    count += s.count;
  }
  double loss() const { return count ? loss_sum / static_cast<double>(count) : 0.0; }
  double acc() const { return count ? static_cast<double>(correct) / static_cast<double>(count) : 0.0; }
};

EpochStats evaluate(Model& model, PrefetchLoader& loader, const EvalSampler& sampler, uint64_t seed) {
  EpochStats st;
  loader.begin(sampler.batches(), [&](int64_t k, std::vector<int64_t>& out) { sampler.indices(k, out); });
  for (int64_t k = 0; k < sampler.batches(); ++k) {
    const Batch& b = loader.next();
    ForwardContext ctx{false, seed, k, 0};
    const Tensor& logits = model.net().forward(b.images, ctx);
    st.add(softmax_cross_entropy(logits, b.labels));
  }
  return st;
}

}  // namespace

TrainSummary run_training(const TrainConfig& c, const Logger& log) {
  const int world_size = 1, rank = 0;  // the distributed runtime replaces these
  const int threads = c.threads > 0 ? c.threads : available_cores();
  set_compute_threads(threads);

  const int64_t global_batch = c.global_batch_size > 0 ? c.global_batch_size : c.batch_size * world_size;
  LS_CHECK_INPUT(global_batch % world_size == 0, "--global-batch-size {} does not split evenly over {} processes",
                 global_batch, world_size);
  const int64_t local_batch = global_batch / world_size;
  const int64_t eval_batch = c.eval_batch_size > 0 ? c.eval_batch_size : std::max<int64_t>(local_batch, 256);

  Data data = load_data(c, eval_batch);
  const models::ModelSpec spec{data.train->sample_shape(), data.train->num_classes()};
  std::unique_ptr<Model> model = models::build_model(c.model, spec, c.seed);
  if (!c.load_weights.empty()) load_weights(c.load_weights, *model);

  OptimizerConfig oc;
  oc.name = c.optimizer;
  oc.momentum = c.momentum;
  oc.nesterov = c.nesterov;
  oc.weight_decay = c.weight_decay;
  std::unique_ptr<Optimizer> opt = make_optimizer(model->params(), oc);

  TrainSampler sampler(data.train->size(), global_batch, world_size, rank, c.seed);
  EvalSampler eval_sampler(data.test->size(), eval_batch, world_size, rank);
  const int64_t spe = sampler.steps_per_epoch();
  const int64_t total_steps = c.max_steps > 0 ? std::min(c.max_steps, c.epochs * spe) : c.epochs * spe;
  const int64_t epochs = (total_steps + spe - 1) / spe;

  LrSchedule sched;
  sched.kind = c.lr_schedule;
  sched.base_lr = c.lr;
  sched.warmup_steps = static_cast<int64_t>(std::llround(c.warmup_epochs * static_cast<double>(spe)));
  sched.total_steps = total_steps;
  sched.step_every = static_cast<int64_t>(std::llround(c.lr_step_epochs * static_cast<double>(spe)));
  if (sched.kind == "step") sched.step_every = std::max<int64_t>(sched.step_every, 1);
  sched.gamma = c.lr_gamma;
  sched.validate();

  MetricsWriter metrics = c.metrics_file.empty() ? MetricsWriter() : MetricsWriter(c.metrics_file);
  PrefetchLoader train_loader(*data.train, local_batch);
  PrefetchLoader test_loader(*data.test, eval_batch);
  const bool progress_on = c.progress == "on" || (c.progress == "auto" && isatty(STDOUT_FILENO));
  ProgressBar bar(progress_on);

  log->info("lockstep {} | {} on {} ({} train / {} test samples of {})", LOCKSTEP_VERSION, c.model, c.dataset,
            group_thousands(static_cast<double>(data.train->size())),
            group_thousands(static_cast<double>(data.test->size())), data.train->sample_shape().str());
  log->info("model: {} parameters, {:.2f} MFLOP forward per sample; {}, lr {} ({}{})",
            group_thousands(static_cast<double>(model->params().numel())),
            static_cast<double>(model->net().forward_flops(model->batch_shape(1))) / 1e6, opt->describe(), c.lr,
            c.lr_schedule, sched.warmup_steps ? fmt::format(", {} warmup steps", sched.warmup_steps) : "");
  log->info("batch {} per process x {} process{} | {} steps/epoch, {} epochs | {} thread{}, OpenBLAS {}", local_batch,
            world_size, world_size == 1 ? "" : "es", spe, epochs, threads, threads == 1 ? "" : "s", blas_core_name());
  log->debug("layers:\n{}", model->summary());

  TrainSummary sum;
  int64_t step = 0;
  double measured_seconds = 0, measured_images = 0;
  std::vector<double> train_times, test_times;
  const int epoch_digits = static_cast<int>(std::to_string(epochs).size());
  Sequential& net = model->net();

  for (int64_t epoch = 0; epoch < epochs && step < total_steps; ++epoch) {
    const int64_t steps_now = std::min(spe, total_steps - step);
    const std::string label = fmt::format("[{:>{}}/{}]", epoch + 1, epoch_digits, epochs);
    train_loader.begin(steps_now, [&](int64_t k, std::vector<int64_t>& out) { sampler.indices(epoch, k, out); });
    bar.start(label, steps_now);
    EpochStats train;
    const auto t_epoch = Clock::now();
    auto tick = t_epoch;
    for (int64_t s = 0; s < steps_now; ++s) {
      const Batch& b = train_loader.next();
      const ForwardContext fctx{true, c.seed, step, sampler.shard_offset()};
      const Tensor& logits = net.forward(b.images, fctx);
      const LossStats ls = softmax_cross_entropy(logits, b.labels);
      LS_CHECK(std::isfinite(ls.loss_sum), "training diverged: loss is {} at step {} (try a smaller --lr)",
               ls.loss_sum, step);
      Tensor dlogits = net.output_grad();
      softmax_cross_entropy_backward(logits, b.labels, 1.f / static_cast<float>(b.size()), dlogits);
      net.backward(BackwardContext{false});
      opt->step(sched.lr(step));
      train.add(ls);
      const auto now = Clock::now();
      if (step >= kWarmupSteps || total_steps <= kWarmupSteps) {
        measured_seconds += std::chrono::duration<double>(now - tick).count();
        measured_images += static_cast<double>(b.size() * world_size);
      }
      tick = now;
      ++step;
      bar.update(s + 1, train.loss(), static_cast<double>(train.count) / seconds_since(t_epoch), s + 1 == steps_now);
    }
    const double train_s = seconds_since(t_epoch);
    const auto t_test = Clock::now();
    const EpochStats test = evaluate(*model, test_loader, eval_sampler, c.seed);
    const double test_s = seconds_since(t_test);
    bar.clear();
    const double ips = static_cast<double>(train.count) / train_s;
    log->info("{} (train) acc: {:.2f}%, loss: {:.3f} | (test) acc: {:.2f}%, loss: {:.3f} | {:.2f}s, {:.2f}s | {} img/s",
              label, 100 * train.acc(), train.loss(), 100 * test.acc(), test.loss(), train_s, test_s,
              group_thousands(ips));
    metrics.write({{"type", "epoch"}, {"epoch", epoch + 1}, {"step", step}, {"train_loss", train.loss()},
                   {"train_acc", train.acc()}, {"test_loss", test.loss()}, {"test_acc", test.acc()},
                   {"seconds", train_s}, {"test_seconds", test_s}, {"images_per_sec", ips},
                   {"lr", sched.lr(step - 1)}});
    train_times.push_back(train_s);
    test_times.push_back(test_s);
    sum.train_seconds += train_s;
    sum.test_acc = test.acc();
    sum.test_loss = test.loss();
    sum.epochs = epoch + 1;
    if (c.target_accuracy > 0.f && test.acc() >= c.target_accuracy) {
      log->info("reached the target test accuracy {:.2f}% at epoch {}", 100.0 * c.target_accuracy, epoch + 1);
      sum.reached_target = true;
      break;
    }
  }
  sum.steps = step;
  sum.images_per_sec = measured_seconds > 0 ? measured_images / measured_seconds : 0.0;

  // The seeds' summary: mean epoch times with the first epoch excluded (it pays for warm-up).
  const size_t first = train_times.size() > 1 ? 1 : 0;
  double tr = 0, te = 0;
  for (size_t i = first; i < train_times.size(); ++i) {
    tr += train_times[i];
    te += test_times[i];
  }
  const double n = static_cast<double>(train_times.size() - first);
  if (n > 0)
    log->info("Average time TRAIN {:.2f}s TEST {:.2f}s ({}) | {} img/s after {} warm-up steps", tr / n, te / n,
              first ? fmt::format("epochs 2-{}", train_times.size()) : std::string("1 epoch"),
              group_thousands(sum.images_per_sec), kWarmupSteps);
  metrics.write({{"type", "summary"}, {"world_size", world_size}, {"steps", sum.steps}, {"epochs", sum.epochs},
                 {"reached_target", sum.reached_target},
                 {"images_per_sec", sum.images_per_sec}, {"test_acc", sum.test_acc}, {"test_loss", sum.test_loss},
                 {"train_seconds", sum.train_seconds}, {"model", c.model}, {"batch_size", local_batch},
                 {"global_batch_size", global_batch}, {"threads", threads}});
  if (!c.save_weights.empty()) {
    const auto [mean, std] = data.train->input_normalization();
    save_weights(c.save_weights, *model,
                 {{"dataset", c.dataset}, {"input_mean", fmt::format("{:.9g}", mean)},
                  {"input_std", fmt::format("{:.9g}", std)}, {"sample_shape", data.train->sample_shape().str()}});
    log->info("weights written to {}", c.save_weights);
  }
  return sum;
}

}  // namespace lockstep
