// BucketReducer: in-order bucket launches onto one communication worker.
#include "comm/bucket_reducer.h"

#include <fmt/format.h>

#include "core/error.h"

namespace lockstep {

BucketReducer::BucketReducer(Communicator& comm, Tensor grads, std::vector<Bucket> buckets, Options options)
    : comm_(comm), grads_(std::move(grads)), buckets_(std::move(buckets)), options_(options) {
  LS_CHECK(!options_.shm || options_.wire == WireType::F32, "shared-memory reduction is fp32 only");
  if (options_.overlap && comm_.size() > 1) {
    thread_comm_ = comm_.duplicate();
    worker_ = std::make_unique<OrderedWorker>([this](size_t b) { reduce(b, *thread_comm_); });
  }
}

BucketReducer::~BucketReducer() = default;

float BucketReducer::grad_scale() const {
  return options_.average ? 1.f / static_cast<float>(comm_.size()) : 1.f;
}

std::string BucketReducer::describe() const {
  return options_.shm ? comm_.backend() + ", shared memory" : comm_.backend();
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
  if (worker_) worker_->restart();
  armed_ = true;
}

void BucketReducer::ready(int64_t end) {
  if (!worker_ || !armed_) return;
  const size_t launched = worker_->launched();
  size_t launch = launched;
  while (launch < buckets_.size() && buckets_[launch].end <= end) ++launch;
  if (launch == launched) return;
  if (options_.timeline)
    for (size_t b = launched; b < launch; ++b)
      options_.timeline->instant(fmt::format("bucket {} ready", b), "bucket", Timeline::kCompute,
                                 Timeline::Clock::now());
  worker_->launch(launch);
}

void BucketReducer::finish() {
  const auto t0 = Timeline::Clock::now();
  if (!worker_) {
    // In order on this thread. A world of one has nothing to sum, but a 16-bit
    // wire still rounds, as it would at any size.
    if (comm_.size() > 1 || options_.wire != WireType::F32)
      for (size_t b = 0; b < buckets_.size(); ++b) reduce(b, comm_);
  } else {
    if (!armed_) worker_->restart();  // nothing was launched during backward
    armed_ = false;
    worker_->launch(buckets_.size());
    const size_t all = buckets_.size();
    worker_->wait([all](size_t done, size_t) { return done == all; });
  }
  // With shared memory the other ranks read this rank's gradients: return only
  // once they are done, so nothing (a backward, a user) can overwrite them early.
  quiesce();
  last_wait_ = std::chrono::duration<double>(Timeline::Clock::now() - t0).count();
}

}  // namespace lockstep
