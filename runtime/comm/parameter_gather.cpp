// ParameterGather: the ranges in forward order, gathered on the calling
// thread or one communication thread.
#include "comm/parameter_gather.h"

#include <fmt/format.h>

#include "core/error.h"

namespace lockstep {

ParameterGather::ParameterGather(Communicator& comm, Tensor values, const std::vector<ElementRange>& buckets,
                                 Options options)
    : comm_(comm), values_(std::move(values)), options_(options) {
  constexpr int64_t piece = kGatherSegments * kReduceSegment;
  for (size_t b = buckets.size(); b-- > 0;) {
    const ElementRange& bucket = buckets[b];
    LS_CHECK(bucket.begin >= 0 && bucket.end <= values_.numel() && (b == 0 || buckets[b - 1].end == bucket.begin),
             "parameter gather: bucket {} [{}, {}) is not the next range of {} elements", b, bucket.begin, bucket.end,
             values_.numel());
    // Pieces from the bucket's start (the reduce-scatter's segments), highest first.
    const int64_t pieces = (bucket.numel() + piece - 1) / piece;
    for (int64_t k = pieces; k-- > 0;)
      ranges_.push_back({bucket.begin + k * piece, std::min(bucket.end, bucket.begin + (k + 1) * piece)});
  }
  if (options_.overlap && comm_.size() > 1) {
    thread_comm_ = comm_.duplicate();
    thread_ = std::thread([this] { run(); });
  }
}

ParameterGather::~ParameterGather() {
  if (!thread_.joinable()) return;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_ == launched_ || error_; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ParameterGather::gather(size_t r, Communicator& comm) {
  const ElementRange& range = ranges_[r];
  const auto t0 = Timeline::Clock::now();
  CollectiveScope scope(options_.tracker, CollectiveKind::ParameterGather, static_cast<int32_t>(r));
  if (options_.shm) {
    options_.shm->allgather(range.begin, range.end);
  } else {
    Tensor slice = values_.slice(range.begin, Shape{range.numel()});
    comm.allgather_owned(slice);
  }
  if (options_.timeline)
    options_.timeline->span(fmt::format("allgather parameters {}", r), "allgather",
                            overlapping() ? Timeline::kComm : Timeline::kCompute, t0, Timeline::Clock::now(),
                            fmt::format(R"({{"range":{},"bytes":{}}})", r, range.numel() * 4));
}

void ParameterGather::start() {
  if (comm_.size() == 1) return;
  if (!overlapping()) {
    const auto t0 = Timeline::Clock::now();
    for (size_t r = 0; r < ranges_.size(); ++r) gather(r, comm_);
    waited_ += std::chrono::duration<double>(Timeline::Clock::now() - t0).count();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_) std::rethrow_exception(error_);
    LS_CHECK(done_ == launched_, "parameter gather: start() while {} of {} ranges are still under way",
             launched_ - done_, launched_);
    done_ = 0;
    launched_ = ranges_.size();
  }
  cv_.notify_all();
}

void ParameterGather::wait_from(int64_t offset) {
  if (!overlapping()) return;
  std::unique_lock<std::mutex> lock(mu_);
  // Ranges go highest offset first: past the done ones, the next range lies
  // wholly below `offset` once everything at or above it has arrived.
  auto arrived = [&] { return error_ || done_ == launched_ || ranges_[done_].end <= offset; };
  if (!arrived()) {
    const auto t0 = Timeline::Clock::now();
    cv_.wait(lock, arrived);
    const auto t1 = Timeline::Clock::now();
    waited_ += std::chrono::duration<double>(t1 - t0).count();
    if (options_.timeline) options_.timeline->span("wait for parameters", "allgather", Timeline::kCompute, t0, t1);
  }
  if (error_) std::rethrow_exception(error_);
}

double ParameterGather::take_wait_seconds() {
  std::lock_guard<std::mutex> lock(mu_);
  const double w = waited_;
  waited_ = 0;
  return w;
}

void ParameterGather::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || (done_ < launched_ && !error_); });
    if (stop_) return;
    const size_t r = done_;
    lock.unlock();
    std::exception_ptr err;
    try {
      gather(r, *thread_comm_);
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
