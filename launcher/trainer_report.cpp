// Trainer: the start-up lines (what runs where, and how), and the end of a
// completed run -- the summary figures, the seeds'
// "Average time" line, --benchmark's line, memory high-water marks and the
// metrics file's summary record -- and the clipping figures the epoch lines
// report (trainer.h has the class; trainer.cpp the loop).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/weights.h"
#include "core/blas_kernels.h"
#include "data/gpt2_vocab.h"
#include "core/cpu.h"
#include "data/augment.h"
#include "device_options.h"
#include "metrics.h"
#include "nn/step_floor.h"
#include "ops/simd_level.h"
#include "progress.h"
#include "recipe.h"
#include "reductions.h"
#include "stop_signals.h"
#include "text_sample.h"
#include "trainer.h"

namespace lockstep {
namespace {

// The timed steps in consecutive windows of kRateWindow (a partial last one
// left out), each window's images/s: the statistic scripts/bench/torch_*.py
// report for PyTorch (the median of 10-step windows), and the spread a noisy
// or host-bound run shows.
constexpr size_t kRateWindow = 10;
struct WindowRates {
  size_t count = 0;
  double median = 0, min = 0, max = 0;
};
WindowRates window_rates(const std::vector<double>& step_seconds, double images_per_step) {
  std::vector<double> rates;
  for (size_t i = 0; i + kRateWindow <= step_seconds.size(); i += kRateWindow) {
    double s = 0;
    for (size_t j = i; j < i + kRateWindow; ++j) s += step_seconds[j];
    if (s > 0) rates.push_back(images_per_step * static_cast<double>(kRateWindow) / s);
  }
  if (rates.empty()) return {};
  std::sort(rates.begin(), rates.end());
  const size_t n = rates.size();
  return {n, n % 2 ? rates[n / 2] : 0.5 * (rates[n / 2 - 1] + rates[n / 2]), rates.front(), rates.back()};
}

// What the run holds between steps, by owner (Model::memory_held, the
// optimizer's state and, on the GPU, the cuDNN workspace): the summary's
// held_mib key, the log line's name, and the bytes.
struct HeldPart {
  const char* key;
  const char* name;
  int64_t bytes;
};
std::vector<HeldPart> held_parts(const Model::MemoryHeld& m, int64_t optimizer_bytes,
                                 std::optional<int64_t> workspace_bytes) {
  std::vector<HeldPart> parts = {{"parameters", "parameters", m.parameters},
                                 {"gradients", "gradients", m.gradients},
                                 {"optimizer_state", "optimizer state", optimizer_bytes},
                                 {"buffers", "buffers", m.buffers},
                                 {"activations", "activations", m.layers.activations},
                                 {"activation_gradients", "activation gradients", m.layers.activation_gradients},
                                 {"layer_scratch", "layer scratch", m.layers.scratch}};
  if (workspace_bytes) parts.push_back({"cudnn_workspace", "cuDNN workspace", *workspace_bytes});
  return parts;
}

}  // namespace

void Trainer::report_start() {
  const int world = comm_.size();
  log_->info("lockstep {} | {} on {} ({} train / {} test samples of {}){}", LOCKSTEP_VERSION, c_.model, name(c_.dataset),
             group_thousands(static_cast<double>(train_->size())), group_thousands(static_cast<double>(test_->size())),
             train_->sample_shape().str(),
             augmentation(c_) == Augment::CropFlip
                 ? fmt::format(", augmented: random crop (pad {}) and horizontal flip", kCropPad)
                 : "");
  log_->info("configuration: {}", describe_settings(c_));  // what was set; every option at debug
  log_->debug("every option: {}", describe_settings(c_, true));
  if (!c_.unknown_env.empty() && comm_.rank() == 0)
    log_->warn("ignored: {} {} set but {} no trainer option (see trainer --help)", fmt::join(c_.unknown_env, ", "),
               c_.unknown_env.size() == 1 ? "is" : "are", c_.unknown_env.size() == 1 ? "names" : "name");
  log_->info("model: {} parameters, {:.2f} MFLOP forward per sample; {}{}, lr {} ({}{}){}{}{}",
             group_thousands(static_cast<double>(model_->params().numel())),
             static_cast<double>(model_->net().forward_flops(model_->batch_shape(1))) / 1e6, opt_->describe(),
             sequences()        ? (c_.weight_decay > 0.f ? " on matrices and embeddings (not biases and LayerNorms)" : "")
             : c_.decay_bn_bias ? ""
                                : " without decay on biases and batch norm",
             describe_lr(c_, global_batch_),
             name(c_.lr_schedule),
             !sched_.warmup_steps ? ""
             : sched_.warmup_start_lr > 0.f
                 ? fmt::format(", {} warmup steps from {}", sched_.warmup_steps, sched_.warmup_start_lr)
                 : fmt::format(", {} warmup steps", sched_.warmup_steps),
             c_.label_smoothing > 0.f ? fmt::format(", label smoothing {}", c_.label_smoothing) : "",
             c_.clip_grad_norm > 0.f ? fmt::format(", gradients clipped to norm {}", c_.clip_grad_norm) : "",
             c_.layout != LayoutChoice::Nhwc ? "" : fmt::format("; activations channels-last (--layout {})",
                                         c_.layout_auto_why.empty() ? "nhwc" : "auto: " + c_.layout_auto_why));
  log_->info("batch {} per process x {} process{}{} = {} per step | {} steps/epoch, {} epochs | {} thread{}, OpenBLAS "
             "{}, own kernels {}",
             micro_batch_, world, world == 1 ? "" : "es",
             c_.accumulate_steps > 1 ? fmt::format(" x {} accumulation steps", c_.accumulate_steps) : "",
             global_batch_, steps_per_epoch_, epochs_, threads_, threads_ == 1 ? "" : "s",
             blas_kernels_in_use().describe(), ops::simd_clone_level());
  log_->debug("CPU features: {}", cpu_features().describe());  // what the kernel choices were made from
  const std::string chosen = c_.device_auto_why.empty() ? "" : fmt::format(" (--device auto: {})", c_.device_auto_why);
  if (!dev_ && !chosen.empty()) log_->info("device: the CPU{}", chosen);
  if (dev_)
    log_->info("device: {}, --comm {}{}{}{}", dev_->describe(), comm_name(dev_->transport()), chosen,
               c_.precision == Precision::F32
                   ? ""
                   : fmt::format("; precision {} (activations and tensor-core math in {}; fp32 weights, gradients "
                                 "and gradient averaging{})",
                                 name(c_.precision), name(c_.precision),
                                 c_.precision == Precision::F16
                                     ? fmt::format("; dynamic loss scale from {}, doubled after {} finite steps",
                                                   c_.loss_scale, c_.loss_scale_window)
                                     : ""),
               c_.cuda_graph ? fmt::format("; --cuda-graph: each batch slot's step captured after {} eager steps, "
                                           "then replayed (again after each evaluation)",
                                           DeviceRuntime::kGraphWarmup)
                             : "");
  if (world > 1 || dev_ || c_.zero_stage)
    log_->info("world: {} rank{} on {} node{}; {}{}", world, world == 1 ? "" : "s", comm_.nodes(),
               comm_.nodes() == 1 ? "" : "s", dopt_->describe(),
               hierarchical_ ? fmt::format("; hierarchical allreduce: within each host, then along {} hosts",
                                           comm_.nodes())
                             : "");
  if (!hierarchy_note_.empty() && comm_.rank() == 0) log_->warn("{}", hierarchy_note_);  // the same on every rank
  if (world > 1 && !overlap_.why.empty())
    log_->info("overlap: gradient buckets reduced {} backward (--overlap auto: {})", overlap_.on ? "during" : "after",
               overlap_.why);
  if (resumed_from_)
    log_->info("resumed from {} at step {} (epoch {}, step {} of it){}", *resumed_from_, progress_.step,
               progress_.epoch + 1, progress_.step_in_epoch,
               resumed_loss_scale_.scale > 0.f && c_.precision == Precision::F16
                   ? fmt::format("; fp16 loss scale {}, {} steps skipped so far", resumed_loss_scale_.scale,
                                 resumed_loss_scale_.skipped)
                   : "");
  if (dev_ && c_.layout == LayoutChoice::Nhwc && c_.precision == Precision::F32 && c_.cudnn_deterministic && rank0())
    log_->warn("--layout nhwc in fp32: cuDNN's deterministic fp32 channels-last kernels can be far slower than NCHW "
               "(convnet on an H100: 786 against 10,541 img/s); NHWC is for 16-bit tensor cores (docs/gpu.md)");
  if (c_.sync_batchnorm && model_->buffers().params().empty())
    log_->warn("--sync-batchnorm: model {} has no batch norm layers; nothing to synchronise", c_.model);
  log_->debug("layers:\n{}", model_->summary());
}

std::pair<double, int64_t> Trainer::clip_state() {
  if (dev_) {
    const StepState st = dev_->read_step_state();
    return {st.grad_norm, st.clipped};
  }
  return {dopt_->last_grad_norm(), dopt_->clipped_steps()};
}

void Trainer::report(TrainSummary& sum, const RunTally& t, RunRecords& records) {
  const int world = comm_.size();
  const int K = c_.accumulate_steps;
  // The timed steps: every one trains global_batch_ images.
  double measured_seconds = 0;
  for (const double s : t.step_seconds) measured_seconds += s;
  const auto measured_steps = static_cast<double>(t.step_seconds.size());
  sum.images_per_sec =
      measured_seconds > 0 ? measured_steps * static_cast<double>(global_batch_) / measured_seconds : 0.0;
  sum.measured_seconds = measured_seconds;

  // The seeds' summary: mean epoch times with the first epoch excluded (it pays for warm-up).
  const size_t first = t.train_seconds.size() > 1 ? 1 : 0;
  double tr = 0, te = 0;
  for (size_t i = first; i < t.train_seconds.size(); ++i) {
    tr += t.train_seconds[i];
    te += t.test_seconds[i];
  }
  const double n = static_cast<double>(t.train_seconds.size() - first);
  // Language models count tokens: every sample is T of them.
  const double per_sample = sequences() ? static_cast<double>(model_->sample_shape()[0]) : 1.0;
  const double tokens_per_sec = sum.images_per_sec * per_sample;
  const double mfu = sgemm_gflops_ > 0 ? tokens_per_sec * flops_per_token() / (sgemm_gflops_ * 1e9) : 0.0;
  const char* unit = sequences() ? "tok/s" : "img/s";
  std::string throughput =
      world > 1 ? fmt::format("{} {} total, {} {} per rank ({} ranks)", group_thousands(sum.images_per_sec * per_sample),
                              unit, group_thousands(sum.images_per_sec * per_sample / world), unit, world)
                : fmt::format("{} {}", group_thousands(sum.images_per_sec * per_sample), unit);
  if (sgemm_gflops_ > 0)
    throughput += fmt::format(", MFU {:.1f}% ({:.0f} model GFLOP/s of a measured {:.0f} GFLOP/s sgemm)", 100 * mfu,
                              tokens_per_sec * flops_per_token() / 1e9, sgemm_gflops_);
  // Memory high-water marks (rank 0's; every rank of one model plans the same),
  // logged before the seed's summary lines (--benchmark's line stays the last).
  const double mib = 1 << 20;
  const double host_peak_mib = static_cast<double>(peak_resident_bytes()) / mib;
  log_->info("memory: host peak resident {:.0f} MiB{}", host_peak_mib, dev_ ? "; " + dev_->memory_report() : "");
  nlohmann::json memory = {{"host_peak_resident_mib", host_peak_mib}};
  std::optional<int64_t> workspace_bytes, steady_peak_bytes;  // the GPU's
  if (dev_) {
    const DeviceRuntime::MemoryStats m = dev_->memory_stats();
    memory["gpu_peak_allocated_mib"] = static_cast<double>(m.peak_allocated_bytes) / mib;
    memory["gpu_peak_reserved_mib"] = static_cast<double>(m.peak_reserved_bytes) / mib;
    memory["gpu_mallocs"] = m.device_mallocs;
    if (m.steady_peak_allocated_bytes >= 0) {
      memory["gpu_steady_peak_allocated_mib"] = static_cast<double>(m.steady_peak_allocated_bytes) / mib;
      steady_peak_bytes = m.steady_peak_allocated_bytes;
    }
    memory["gpu_workspace_mib"] = static_cast<double>(m.workspace_bytes) / mib;
    workspace_bytes = m.workspace_bytes;
  }
  std::string line;
  int64_t held_total = 0;
  for (const HeldPart& p : held_parts(model_->memory_held(), opt_->state_bytes(), workspace_bytes)) {
    memory["held_mib"][p.key] = static_cast<double>(p.bytes) / mib;
    line += fmt::format("{}{} {:.1f}", line.empty() ? "" : ", ", p.name, static_cast<double>(p.bytes) / mib);
    held_total += p.bytes;
  }
  const double held_total_mib = static_cast<double>(held_total) / mib;
  memory["held_mib"]["total"] = held_total_mib;
  // On the GPU, what the timed steps' peak holds beyond that: the step's
  // transients, the communication buffers and the allocator's rounding. (Below
  // it when evaluation, after the timed steps, grew what is held.)
  std::string beyond;
  if (steady_peak_bytes) {
    const double d = static_cast<double>(*steady_peak_bytes - held_total) / mib;
    beyond = fmt::format("; the timed steps' GPU peak is {:.1f} MiB {} that{}", std::abs(d), d >= 0 ? "above" : "below",
                         d >= 0 ? " (transients within the step, communication buffers, the allocator's rounding)" : "");
  }
  log_->info("memory held between steps: {} MiB: {:.1f} MiB in all{}", line, held_total_mib, beyond);
  if (n > 0)
    log_->info("Average time TRAIN {:.2f}s{} ({}) | {} after {} warm-up steps", tr / n,
               c_.eval ? fmt::format(" TEST {:.2f}s", te / n) : std::string(),
               first ? fmt::format("epochs {}-{}", t.epochs[first], t.epochs.back())
                     : fmt::format("epoch {}", t.epochs.front()),
               throughput, kWarmupSteps);
  const double ms_per_step = measured_steps > 0 ? 1e3 * measured_seconds / measured_steps : 0.0;
  // Input-bound: the step waited for its batch (PrefetchLoader) a tenth of the
  // time or more, and at least 1 ms per step (tiny steps' waits are noise).
  const double data_fraction = measured_seconds > 0 ? sum.data_wait_seconds / measured_seconds : 0.0;
  const double data_ms = measured_steps > 0 ? 1e3 * sum.data_wait_seconds / measured_steps : 0.0;
  if (data_fraction >= 0.1 && data_ms >= 1.0 && rank0())
    log_->warn("input-bound: training waited for its next batch {:.0f}% of the timed steps ({:.1f} ms per step); "
               "more --loader-threads (now {}) may help",
               100 * data_fraction, data_ms, loader_threads_);
  const WindowRates windows = window_rates(t.step_seconds, static_cast<double>(global_batch_));
  if (c_.benchmark)
    log_->info("benchmark: {} on {} samples{}, batch {} per rank x {} rank{}: {} img/s total, {} img/s per rank, "
               "{:.1f} ms per step ({} steps timed, {} warm-up steps left out){}",
               c_.model, train_->sample_shape().str(),
               c_.benchmark_input == BenchmarkInput::Fixed ? " (one fixed batch)" : "",
               micro_batch_ * K, world, world == 1 ? "" : "s",
               group_thousands(sum.images_per_sec), group_thousands(sum.images_per_sec / world), ms_per_step,
               std::llround(measured_steps), progress_.step - t.first_step - std::llround(measured_steps),
               windows.count < 2 ? std::string()
                                 : fmt::format("; {}-step windows: median {} img/s, {}-{}", kRateWindow,
                                               group_thousands(windows.median), group_thousands(windows.min),
                                               group_thousands(windows.max)));
  // The step's floor (nn/step_floor.h), for holding ms_per_step against the
  // machine's matmul rate and copy bandwidth (scripts/gpu/bench_table.py).
  const Shape sample = model_->batch_shape(1);
  const StepFloor floor = step_floor(
      model_->net().forward_flops(sample), model_->net().forward_traffic(sample), sample.numel(), micro_batch_, K,
      model_->params().numel(), static_cast<int>(opt_->state_count()),
      c_.device == DeviceKind::Cuda && c_.precision != Precision::F32 ? 2 : 4);
  nlohmann::json summary = {
      {"type", "summary"}, {"world_size", world}, {"steps", sum.steps}, {"epochs", sum.epochs},
      {"mean_train_seconds", n > 0 ? tr / n : 0.0}, {"mean_test_seconds", n > 0 ? te / n : 0.0},
      {"eval", c_.eval}, {"benchmark", c_.benchmark}, {"benchmark_input", name(c_.benchmark_input)},
      {"ms_per_step", ms_per_step}, {"warmup_seconds", sum.warmup_seconds},
      {"floor_flops_per_step", floor.flops}, {"floor_bytes_per_step", floor.bytes},
      {"lr", effective_lr(c_, global_batch_)},
      {"reached_target", sum.reached_target}, {"images_per_sec", sum.images_per_sec},
      {"images_per_sec_per_rank", sum.images_per_sec / world}, {"test_acc", sum.test_acc},
      {"test_loss", sum.test_loss}, {"train_seconds", sum.train_seconds}, {"model", c_.model},
      {"batch_size", micro_batch_}, {"global_batch_size", global_batch_},
      {"accumulate_steps", K}, {"threads", threads_}, {"resumed", resumed_from_.has_value()},
      {"blas_kernels", blas_core_name()}, {"simd_clone", ops::simd_clone_level()},
      {"comm_wait_seconds", sum.comm_wait_seconds},
      {"exposed_comm_fraction", measured_seconds > 0 ? sum.comm_wait_seconds / measured_seconds : 0.0},
      {"data_wait_seconds", sum.data_wait_seconds}, {"data_wait_fraction", data_fraction},
      {"loader_threads", loader_threads_},
      {"window_steps", kRateWindow}, {"windows", windows.count},
      {"window_median_images_per_sec", windows.median}, {"window_min_images_per_sec", windows.min},
      {"window_max_images_per_sec", windows.max},
      {"overlap", dopt_->buckets().size() > 0 && overlap_.on && world > 1}, {"overlap_mode", name(c_.overlap)}};
  if (sequences()) {
    summary["tokens_per_sec"] = tokens_per_sec;
    summary["mfu"] = mfu;
    summary["sgemm_gflops"] = sgemm_gflops_;
    summary["model_flops_per_token"] = flops_per_token();
    summary["val_loss"] = sum.test_loss;
  }
  summary.update(memory);
  records.write(summary);
}

double Trainer::flops_per_token() const {
  const Shape one = model_->batch_shape(1);
  return 3.0 * static_cast<double>(model_->net().forward_flops(one)) / static_cast<double>(one.numel());
}

void Trainer::log_epoch(const std::string& label, int64_t epoch, const Sums& tr, const EvalResult& test,
                        double train_s, double test_s, int64_t first_step, RunRecords& records) {
  const double ips = tr.count / train_s;  // samples, or tokens (every position is a target)
  if (sequences()) {  // language models: loss and perplexity, tokens/s and MFU
    const double mfu = sgemm_gflops_ > 0 ? ips * flops_per_token() / (sgemm_gflops_ * 1e9) : 0.0;
    const std::string mfu_text = sgemm_gflops_ > 0 ? fmt::format(", MFU {:.1f}%", 100 * mfu) : "";
    if (c_.eval)
      log_->info("{} (train) loss: {:.3f}, ppl {:.2f} | (val) loss: {:.3f}, ppl {:.2f} | {:.2f}s, {:.2f}s | {} tok/s{}",
                 label, tr.mean_loss(), std::exp(tr.mean_loss()), test.loss, std::exp(test.loss), train_s, test_s,
                 group_thousands(ips), mfu_text);
    else
      log_->info("{} (train) loss: {:.3f}, ppl {:.2f} | {:.2f}s | {} tok/s{}", label, tr.mean_loss(),
                 std::exp(tr.mean_loss()), train_s, group_thousands(ips), mfu_text);
    records.epoch({{"type", "epoch"}, {"epoch", epoch + 1}, {"step", progress_.step}, {"train_loss", tr.mean_loss()},
                   {"train_acc", tr.acc()}, {"test_loss", test.loss}, {"test_acc", test.acc},
                   {"val_loss", test.loss}, {"val_perplexity", std::exp(test.loss)},
                   {"seconds", train_s}, {"test_seconds", test_s}, {"images_per_sec", ips / model_->sample_shape()[0]},
                   {"tokens_per_sec", ips}, {"mfu", mfu}, {"lr", sched_.lr(progress_.step - 1)}},
                  c_.eval);
  } else if (c_.eval)
    log_->info("{} (train) acc: {:.2f}%, loss: {:.3f} | (test) acc: {:.2f}%, loss: {:.3f} | {:.2f}s, {:.2f}s | {} img/s",
               label, 100 * tr.acc(), tr.mean_loss(), 100 * test.acc, test.loss, train_s, test_s,
               group_thousands(ips));
  else
    log_->info("{} (train) acc: {:.2f}%, loss: {:.3f} | {:.2f}s | {} img/s", label, 100 * tr.acc(), tr.mean_loss(),
               train_s, group_thousands(ips));
  if (!sequences())
    records.epoch({{"type", "epoch"}, {"epoch", epoch + 1}, {"step", progress_.step}, {"train_loss", tr.mean_loss()},
                   {"train_acc", tr.acc()}, {"test_loss", test.loss}, {"test_acc", test.acc},
                   {"seconds", train_s}, {"test_seconds", test_s}, {"images_per_sec", ips},
                   {"lr", sched_.lr(progress_.step - 1)}},
                  c_.eval);
  if (c_.precision == Precision::F16) {  // the epoch's train loss read has already waited for the device
    const StepState st = dev_->read_step_state();
    log_->info("{} fp16 loss scale {} | {} of {} steps skipped so far", label, st.scale, st.skipped, progress_.step);
    records.loss_scale({{"type", "loss_scale"}, {"epoch", epoch + 1}, {"step", progress_.step},
                        {"loss_scale", st.scale}, {"skipped_steps", st.skipped}});
  }
  if (c_.clip_grad_norm > 0.f) {
    const auto [norm, clipped] = clip_state();
    log_->info("{} gradient norm {:.4g} at the last step (limit {}) | {} of {} updates clipped so far", label, norm,
               c_.clip_grad_norm, clipped, progress_.step - first_step);
    records.grad_clip({{"type", "grad_clip"}, {"epoch", epoch + 1}, {"step", progress_.step},
                       {"grad_norm", norm}, {"clipped_steps", clipped}});
  }
}

void Trainer::finish_run(TrainSummary& sum, const RunTally& tally, RunRecords& records) {
  if (sum.stopped_by != 0) {
    if (c_.checkpoint_dir.empty())
      log_->warn("stopped by {} after step {}: no --checkpoint-dir, so nothing was saved", signal_name(sum.stopped_by),
                 progress_.step);
    else
      log_->info("stopped by {} after step {}: checkpoint in {}; continue with --resume", signal_name(sum.stopped_by),
                 progress_.step, c_.checkpoint_dir);
    records.write({{"type", "stopped"}, {"signal", signal_name(sum.stopped_by)}, {"step", progress_.step},
                   {"checkpoint_dir", c_.checkpoint_dir}});
    return;
  }
  if (c_.check_replicas_every > 0)
    log_->info("replicas identical at all {} checks (every {} steps)", replica_checks_, c_.check_replicas_every);
  report(sum, tally, records);
  if (!c_.save_weights.empty()) sync_buffers();
  if (rank0() && c_.sample_tokens > 0) log_sample();
  if (rank0() && !c_.save_weights.empty()) {
    const auto [mean, std] = train_->input_normalization();
    save_weights(c_.save_weights, *model_,
                 {{"dataset", std::string(name(c_.dataset))}, {"input_mean", fmt::format("{:.9g}", mean)},
                  {"input_std", fmt::format("{:.9g}", std)}, {"sample_shape", train_->sample_shape().str()}});
    log_->info("weights written to {}", c_.save_weights);
  }
}

void Trainer::read_vocabulary() {
  const std::string path = c_.vocab_file.empty() ? c_.data_dir + "/gpt2.tiktoken" : c_.vocab_file;
  try {
    vocab_ = std::make_unique<Gpt2Vocab>(path);
  } catch (const InputError& e) {
    LS_INPUT_ERROR("--vocab-file: {}", e.message());
  }
  LS_CHECK_INPUT(c_.vocab_size <= vocab_->size(), "--vocab-file {} holds {} tokens, fewer than --vocab-size {}", path,
                 vocab_->size(), c_.vocab_size);
  prompt_tokens_ = c_.prompt.empty() ? std::vector<int32_t>{vocab_->end_of_text()} : vocab_->encode(c_.prompt);
  for (const int32_t t : prompt_tokens_)
    LS_CHECK_INPUT(t < c_.vocab_size, "--prompt: token {} is outside --vocab-size {}", t, c_.vocab_size);
}

void Trainer::log_sample() {
  const std::vector<int32_t> all =
      sample_tokens(*model_, prompt_tokens_, {c_.sample_tokens, model_->sample_shape()[0], c_.seed});
  const auto from = c_.prompt.empty() ? all.begin() + 1 : all.begin();  // not the <|endoftext|> it started from
  log_->info("sample ({} tokens{}):\n{}", c_.sample_tokens, c_.prompt.empty() ? "" : " after the prompt",
             vocab_->decode(std::span<const int32_t>(&*from, static_cast<size_t>(all.end() - from))));
}

void Trainer::report_restart(int64_t first_step, RunRecords& records) {
  nlohmann::json r = nlohmann::json::parse(c_.restart_record, nullptr, false);  // checked when the options were read
  if (!r.is_object()) return;
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  r["type"] = "restart";
  r["step"] = progress_.step;
  r["resumed_step"] = first_step;
  r["world"] = comm_.size();
  r["global_batch_size"] = global_batch_;
  r["accumulate_steps"] = c_.accumulate_steps;
  r["first_step_unix"] = now;
  if (r.contains("last_step") && r["last_step"].is_number_integer())
    r["steps_lost"] = std::max<int64_t>(0, r["last_step"].get<int64_t>() - first_step);
  if (r.contains("failed_unix") && r["failed_unix"].is_number())
    r["recover_seconds"] = std::max(0.0, now - r["failed_unix"].get<double>());
  records.restart(r);
  log_->info("restarted: attempt {} at {} rank{}, from step {}{}", r["attempt"].dump(), comm_.size(),
             comm_.size() == 1 ? "" : "s", first_step,
             r.contains("recover_seconds")
                 ? fmt::format(", {:.1f} s after lockstep-run saw the failure", r["recover_seconds"].get<double>())
                 : std::string());
}

}  // namespace lockstep
