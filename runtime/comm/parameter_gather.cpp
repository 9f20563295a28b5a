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
    worker_ = std::make_unique<OrderedWorker>([this](size_t r) { gather(r, *thread_comm_); });
  }
}

ParameterGather::~ParameterGather() {
  if (worker_) worker_->settle();  // every rank finishes the gather under way: none is left waiting
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
    std::lock_guard<std::mutex> lock(wait_mu_);
    waited_ += std::chrono::duration<double>(Timeline::Clock::now() - t0).count();
    return;
  }
  worker_->rethrow_if_failed();
  worker_->restart();  // throws while the last gather is under way
  worker_->launch(ranges_.size());
}

void ParameterGather::wait_from(int64_t offset) {
  if (!overlapping()) return;
  // Ranges go highest offset first: past the done ones, the next range lies
  // wholly below `offset` once everything at or above it has arrived.
  const auto t0 = Timeline::Clock::now();
  const bool blocked = worker_->wait(
      [&](size_t done, size_t launched) { return done == launched || ranges_[done].end <= offset; });
  if (!blocked) return;
  const auto t1 = Timeline::Clock::now();
  {
    std::lock_guard<std::mutex> lock(wait_mu_);
    waited_ += std::chrono::duration<double>(t1 - t0).count();
  }
  if (options_.timeline) options_.timeline->span("wait for parameters", "allgather", Timeline::kCompute, t0, t1);
}

double ParameterGather::take_wait_seconds() {
  std::lock_guard<std::mutex> lock(wait_mu_);
  const double w = waited_;
  waited_ = 0;
  return w;
}

}  // namespace lockstep
