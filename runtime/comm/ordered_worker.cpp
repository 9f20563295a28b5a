// OrderedWorker: the communication thread's loop.
#include "comm/ordered_worker.h"

#include "core/error.h"

namespace lockstep {

OrderedWorker::OrderedWorker(Job job) : job_(std::move(job)) {
  thread_ = std::thread([this] { run(); });
}

OrderedWorker::~OrderedWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void OrderedWorker::restart() {
  std::lock_guard<std::mutex> lock(mu_);
  LS_CHECK(done_ == launched_ || error_, "communication worker: a new round while {} of {} jobs are under way",
           launched_ - done_, launched_);
  launched_ = done_ = 0;
}

void OrderedWorker::launch(size_t n) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (n <= launched_) return;
    launched_ = n;
  }
  cv_.notify_all();
}

size_t OrderedWorker::launched() const {
  std::lock_guard<std::mutex> lock(mu_);
  return launched_;
}

bool OrderedWorker::wait(const std::function<bool(size_t, size_t)>& until) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto ready = [&] { return error_ || until(done_, launched_); };
  const bool blocked = !ready();
  if (blocked) cv_.wait(lock, ready);
  if (error_) std::rethrow_exception(error_);
  return blocked;
}

void OrderedWorker::settle() noexcept {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_ == launched_ || error_; });
}

void OrderedWorker::rethrow_if_failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) std::rethrow_exception(error_);
}

bool OrderedWorker::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_ != nullptr;
}

void OrderedWorker::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || (done_ < launched_ && !error_); });
    if (stop_) return;
    const size_t k = done_;
    lock.unlock();
    std::exception_ptr err;
    try {
      job_(k);
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
