// The background checkpoint writer (checkpoint_writer.h).
#include "checkpoint/checkpoint_writer.h"

#include <chrono>
#include <exception>

#include "core/error.h"

namespace lockstep {

CheckpointWriter::CheckpointWriter(bool background) : background_(background) {
  if (background_) thread_ = std::thread([this] { run(); });
}

CheckpointWriter::~CheckpointWriter() {
  if (!background_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();  // run() finishes the job in flight first
}

CheckpointOutcome CheckpointWriter::write(Job& job) {
  CheckpointOutcome out;
  out.step = job.image.step;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    out.path = write_checkpoint(job.dir, job.image, job.keep);
  } catch (const InputError& e) {
    out.error = e.message();
    out.subject = e.subject();
  } catch (const Error& e) {
    out.error = e.message() + " (" + e.file() + ":" + std::to_string(e.line()) + ")";
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.copy_seconds = job.copy_seconds;
  return out;
}

void CheckpointWriter::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return job_.has_value() || stopping_; });
    if (!job_) return;  // stopping, nothing queued
    lock.unlock();
    CheckpointOutcome out = write(*job_);  // job_ is ours until reset below
    lock.lock();
    done_.push_back(std::move(out));
    job_.reset();
    cv_.notify_all();
  }
}

void CheckpointWriter::save(const std::string& dir, const Model& model, Optimizer& opt, const CheckpointInfo& info,
                            int keep, const std::vector<std::pair<std::string, Tensor*>>& opt_state) {
  if (!background_) {
    Job job{dir, keep, checkpoint_image(model, opt, info, opt_state, nullptr)};
    CheckpointOutcome out = write(job);
    std::lock_guard<std::mutex> lock(mu_);
    done_.push_back(std::move(out));
    return;
  }
  wait();  // the staging tensors are free again
  const auto t0 = std::chrono::steady_clock::now();
  Job job{dir, keep, checkpoint_image(model, opt, info, opt_state, &staging_)};
  job.copy_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = std::move(job);
  }
  cv_.notify_all();
}

void CheckpointWriter::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !job_.has_value(); });
}

std::vector<CheckpointOutcome> CheckpointWriter::take() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CheckpointOutcome> out = std::move(done_);
  done_.clear();
  return out;
}

}  // namespace lockstep
