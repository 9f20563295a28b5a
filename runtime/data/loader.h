// PrefetchLoader: a background thread assembles batches (sample indices ->
// normalised float images + labels) into a ring of `depth` slots while the
// training step runs, so the next batch is ready when the step ends.
//
// Protocol: begin(count, plan[, transform]) starts a sequence of `count`
// batches whose indices come from plan(k, out). If given, transform(k, indices,
// images) then edits batch k's images ([n, C, H, W] fp32, n = indices.size())
// in place on the producer thread (augmentation). next() returns batch k in
// order; the batch stays valid until the following next() or begin(). Producer
// errors, the plan's and the transform's included, are rethrown from next().
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "data/dataset.h"

namespace lockstep {

struct Batch {
  Tensor images;  // [n, C, H, W] fp32
  Tensor labels;  // [n] int32
  int64_t index = 0;  // position in the sequence
  int64_t size() const { return labels.numel(); }
};

class PrefetchLoader {
 public:
  using Plan = std::function<void(int64_t k, std::vector<int64_t>& indices)>;
  using Transform = std::function<void(int64_t k, std::span<const int64_t> indices, float* images)>;

  // `host`: where the batch slots live (page-locked memory from the GPU path,
  // so host -> device copies of a batch are asynchronous DMA).
  PrefetchLoader(const Dataset& data, int64_t max_batch, int depth = 3,
                 std::shared_ptr<Allocator> host = cpu_allocator());
  ~PrefetchLoader();
  PrefetchLoader(const PrefetchLoader&) = delete;
  PrefetchLoader& operator=(const PrefetchLoader&) = delete;

  void begin(int64_t count, Plan plan, Transform transform = {});
  const Batch& next();
  // Seconds the consumer spent blocked in next() since the last call (data wait).
  double take_wait_seconds();

 private:
  void run();

  const Dataset& data_;
  const int64_t max_batch_;
  const int depth_;
  std::vector<Batch> slots_;  // full-size tensors
  Batch current_;             // view handed to the consumer

  std::mutex mu_;
  std::condition_variable cv_;
  Plan plan_;
  Transform transform_;
  int64_t total_ = 0, produced_ = 0, consumed_ = 0;
  bool filling_ = false, stop_ = false;
  std::exception_ptr error_;
  double wait_seconds_ = 0;
  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace lockstep
