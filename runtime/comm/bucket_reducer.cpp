// BucketReducer: in-order bucket launches onto one communication thread.
#include "comm/bucket_reducer.h"

#include <fmt/format.h>

#include "core/error.h"

namespace lockstep {

BucketReducer::BucketReducer(Communicator& comm, Tensor grads, std::vector<Bucket> buckets, Options options)
    : comm_(comm), grads_(std::move(grads)), buckets_(std::move(buckets)), options_(options) {
  LS_CHECK(!options_.shm || options_.wire == WireType::F32, "shared-memory reduction is fp32 only");
  if (options_.overlap && comm_.size() > 1) {
    thread_comm_ = comm_.duplicate();
    thread_ = std::thread([this] { run(); });
  }
}

BucketReducer::~BucketReducer() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BucketReducer::reduce(size_t b, Communicator& comm) {
  const Bucket& bucket = buckets_[b];
  const auto t0 = Timeline::Clock::now();
  CollectiveScope scope(options_.tracker, CollectiveKind::Bucket, static_cast<int32_t>(b));
  const bool scatter = options_.scatter_only;
  if (options_.shm) {
    if (scatter)
      options_.shm->reduce_scatter(bucket.begin, bucket.end);
    else
      options_.shm->reduce(bucket.begin, bucket.end);
  } else {
    Tensor slice = grads_.slice(bucket.begin, Shape{bucket.numel()});
    if (scatter)
      comm.reduce_scatter_sum_ordered(slice, options_.wire);
    else
      comm.allreduce_sum_ordered(slice, options_.wire);
  }
  if (options_.timeline)
    options_.timeline->span(fmt::format("{} bucket {}", scatter ? "reduce-scatter" : "allreduce", b), "allreduce",
                            overlapping() ? Timeline::kComm : Timeline::kCompute, t0, Timeline::Clock::now(),
                            fmt::format(R"({{"bucket":{},"bytes":{}}})", b, bucket.numel() * 4));
}

void BucketReducer::quiesce() {
  if (!options_.shm) return;
  CollectiveScope scope(options_.tracker, CollectiveKind::GradientHandoff);
  options_.shm->wait_readers();
}

void BucketReducer::arm() {
  std::lock_guard<std::mutex> lock(mu_);
  launched_ = done_ = 0;
  armed_ = true;
}

void BucketReducer::ready(int64_t end) {
  if (!overlapping()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!armed_) return;
    size_t launch = launched_;
    while (launch < buckets_.size() && buckets_[launch].end <= end) ++launch;
    if (launch == launched_) return;
    if (options_.timeline)
      for (size_t b = launched_; b < launch; ++b)
        options_.timeline->instant(fmt::format("bucket {} ready", b), "bucket", Timeline::kCompute,
                                   Timeline::Clock::now());
    launched_ = launch;
  }
  cv_.notify_all();
}

void BucketReducer::finish() {
  const auto t0 = Timeline::Clock::now();
  if (!overlapping()) {
    // In order on this thread. A world of one has nothing to sum, but a 16-bit
    // wire still rounds, as it would at any size.
    if (comm_.size() > 1 || options_.wire != WireType::F32)
      for (size_t b = 0; b < buckets_.size(); ++b) reduce(b, comm_);
  } else {
    std::unique_lock<std::mutex> lock(mu_);
    if (!armed_) launched_ = done_ = 0;  // nothing was launched during backward
    armed_ = true;
    launched_ = buckets_.size();
    cv_.notify_all();
    cv_.wait(lock, [&] { return done_ == buckets_.size() || error_; });
    armed_ = false;
    if (error_) std::rethrow_exception(error_);
  }
  // With shared memory the other ranks read this rank's gradients: return only
  // once they are done, so nothing (a backward, a user) can overwrite them early.
  quiesce();
  last_wait_ = std::chrono::duration<double>(Timeline::Clock::now() - t0).count();
}

void BucketReducer::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || (done_ < launched_ && !error_); });
    if (stop_) return;
    const size_t b = done_;
    lock.unlock();
    std::exception_ptr err;
    try {
      reduce(b, *thread_comm_);
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    if (err)
      error_ = err;
    else
      ++done_;
    cv_.notify_all();
  }
}

}  // namespace lockstep
