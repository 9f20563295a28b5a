// PrefetchLoader: one producer thread (and its helpers), one consumer, a ring of slots.
// Slot of batch j is j % depth. The producer may fill batch j once the consumer
// has released batch j - depth, i.e. when j < consumed - 1 + depth (the batch the
// consumer holds is released by its next call to next()).
#include "data/loader.h"

#include <algorithm>
#include <chrono>

namespace lockstep {

PrefetchLoader::PrefetchLoader(const Dataset& data, int64_t max_batch, int depth, std::shared_ptr<Allocator> host,
                               int workers)
    : data_(data), max_batch_(max_batch), depth_(depth), workers_(workers) {
  LS_CHECK(depth >= 2, "prefetch depth {} must be at least 2", depth);
  LS_CHECK(max_batch > 0, "batch size {} must be positive", max_batch);
  LS_CHECK(workers >= 1 && workers <= 64, "loader workers {} outside [1, 64]", workers);
  std::vector<int64_t> d{max_batch};
  const Shape sample = data.sample_shape();  // named: a range-for over a temporary's dims() would dangle
  for (int64_t e : sample.dims()) d.push_back(e);
  const int64_t targets = data.targets_per_sample();
  LS_CHECK(targets >= 1, "{}: {} targets per sample", data.name(), targets);
  LS_CHECK(data.input_dtype() == DType::F32 || data.input_dtype() == DType::I32, "{}: {} inputs (F32 or I32)",
           data.name(), dtype_name(data.input_dtype()));
  const Shape labels = targets == 1 ? Shape{max_batch} : Shape{max_batch, targets};
  for (int i = 0; i < depth; ++i)
    slots_.push_back({Tensor::zeros(Shape(std::span<const int64_t>(d)), data.input_dtype(), host),
                      Tensor::zeros(labels, DType::I32, host), 0});
  part_errors_.resize(static_cast<size_t>(workers));
  for (int p = 1; p < workers; ++p) helpers_.emplace_back([this, p] { help(p); });
  thread_ = std::thread([this] { run(); });
}

PrefetchLoader::~PrefetchLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();  // a batch in assembly finishes first (its helpers' parts too)
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    pool_stop_ = true;
  }
  pool_cv_.notify_all();
  for (std::thread& h : helpers_) h.join();
}

void PrefetchLoader::begin(int64_t count, Plan plan, Transform transform) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !filling_; });  // never swap plans under a running fill
  plan_ = std::move(plan);
  transform_ = std::move(transform);
  total_ = count;
  produced_ = consumed_ = 0;
  error_ = nullptr;
  current_ = Batch{};
  lock.unlock();
  cv_.notify_all();
}

const Batch& PrefetchLoader::next() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  LS_CHECK(consumed_ < total_, "next() past the end of a sequence of {} batches", total_);
  ++consumed_;  // releases the previous batch
  cv_.notify_all();
  cv_.wait(lock, [&] { return produced_ >= consumed_ || error_ || stop_; });
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (error_ && produced_ < consumed_) std::rethrow_exception(error_);
  const int64_t k = consumed_ - 1;
  const Batch& slot = slots_[static_cast<size_t>(k % depth_)];
  current_.inputs = slot.inputs.narrow_rows(slot.index);  // index holds the filled count
  current_.labels = slot.labels.narrow_rows(slot.index);
  current_.index = k;
  return current_;
}

double PrefetchLoader::take_wait_seconds() {
  std::lock_guard<std::mutex> lock(mu_);
  const double w = wait_seconds_;
  wait_seconds_ = 0;
  return w;
}

void PrefetchLoader::run() {
  std::vector<int64_t> indices;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || (!error_ && produced_ < total_ && produced_ < consumed_ - 1 + depth_); });
    if (stop_) return;
    const int64_t j = produced_;
    Plan plan = plan_;
    Transform transform = transform_;
    filling_ = true;
    lock.unlock();
    std::exception_ptr err;
    try {
      plan(j, indices);
      LS_CHECK(static_cast<int64_t>(indices.size()) <= max_batch_, "batch of {} samples exceeds the loader's {}",
               indices.size(), max_batch_);
      Batch& slot = slots_[static_cast<size_t>(j % depth_)];
      const auto n = static_cast<int64_t>(indices.size());
      assemble(Job{j, indices, &slot, transform ? &transform : nullptr,
                   static_cast<int>(std::clamp<int64_t>(n, 1, workers_))});
      slot.index = n;
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    filling_ = false;
    if (err)
      error_ = err;
    else
      ++produced_;
    cv_.notify_all();
  }
}

// Part p of job.parts: samples [n * p / parts, n * (p + 1) / parts).
void PrefetchLoader::assemble_part(const Job& job, int p) const {
  const auto n = static_cast<int64_t>(job.indices.size());
  const int64_t b = n * p / job.parts, e = n * (p + 1) / job.parts;
  if (b == e) return;
  const int64_t per = data_.sample_shape().numel();
  const std::span<const int64_t> part = job.indices.subspan(static_cast<size_t>(b), static_cast<size_t>(e - b));
  // Both input types are 4 bytes an element (float images, int32 tokens).
  auto* inputs = static_cast<std::byte*>(job.slot->inputs.raw_data()) + b * per * 4;
  data_.fill(part, inputs, job.slot->labels.data<int32_t>() + b * data_.targets_per_sample());
  if (job.transform) {
    LS_CHECK(job.slot->inputs.dtype() == DType::F32, "{}: a transform edits images, not {}", data_.name(),
             dtype_name(job.slot->inputs.dtype()));
    (*job.transform)(job.k, part, reinterpret_cast<float*>(inputs));
  }
}

void PrefetchLoader::assemble(const Job& job) {
  if (job.parts == 1) {
    assemble_part(job, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    job_ = job;
    parts_left_ = job.parts - 1;
    for (auto& e : part_errors_) e = nullptr;
    ++generation_;
  }
  pool_cv_.notify_all();
  try {
    assemble_part(job, 0);
  } catch (...) {
    part_errors_[0] = std::current_exception();  // only this thread writes part 0's
  }
  std::unique_lock<std::mutex> lock(pool_mu_);
  pool_done_cv_.wait(lock, [&] { return parts_left_ == 0; });
  for (const auto& e : part_errors_)
    if (e) std::rethrow_exception(e);
}

void PrefetchLoader::help(int part) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(pool_mu_);
  while (true) {
    pool_cv_.wait(lock, [&] { return pool_stop_ || generation_ != seen; });
    if (pool_stop_) return;
    seen = generation_;
    if (part >= job_.parts) continue;  // a batch smaller than the workers
    const Job job = job_;
    lock.unlock();
    std::exception_ptr err;
    try {
      assemble_part(job, part);
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    part_errors_[static_cast<size_t>(part)] = err;
    if (--parts_left_ == 0) pool_done_cv_.notify_all();
  }
}

}  // namespace lockstep
