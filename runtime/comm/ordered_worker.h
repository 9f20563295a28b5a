// OrderedWorker: one communication thread that runs numbered jobs 0, 1, 2, ...
// strictly in order, as the caller makes them available. The bucket reducer
// (gradient buckets during backward) and the parameter gather (ZeRO-1's
// ranges during forward) hand their collectives to one each: every rank runs
// the same jobs in the same order, so the collectives match across ranks.
//
// A round: restart() numbers jobs from 0 again (no job may be in flight);
// launch(n) lets jobs [0, n) run; wait(until) blocks until until(done,
// launched) holds. A job that throws stops the round: the error is kept, no
// later job runs, and wait() (and rethrow_if_failed()) rethrow it. The thread
// is joined on destruction (RAII), after the job under way, if any, returns.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace lockstep {

class OrderedWorker {
 public:
  using Job = std::function<void(size_t)>;
  // Starts the thread; job(k) runs there for k = 0, 1, ... in each round.
  explicit OrderedWorker(Job job);
  // Stops the thread after the job under way (launched jobs not yet started are dropped).
  ~OrderedWorker();
  OrderedWorker(const OrderedWorker&) = delete;
  OrderedWorker& operator=(const OrderedWorker&) = delete;

  // A new round: jobs are numbered from 0 again. Requires done == launched.
  void restart();
  // Jobs [0, n) may run; n below the launched count changes nothing.
  void launch(size_t n);
  size_t launched() const;
  // Blocks until until(done, launched) holds or a job failed, then rethrows a
  // failure. True when it had to block (until did not hold at once).
  bool wait(const std::function<bool(size_t done, size_t launched)>& until);
  // Blocks until every launched job is done or one failed; never throws
  // (for destructors that must not leave other ranks waiting).
  void settle() noexcept;
  void rethrow_if_failed() const;
  bool failed() const;

 private:
  void run();

  Job job_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  size_t launched_ = 0;  // jobs the caller made available this round
  size_t done_ = 0;      // jobs finished this round
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;   // last: started after everything it reads
};

}  // namespace lockstep
