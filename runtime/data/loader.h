// PrefetchLoader: a background thread assembles batches (sample indices ->
// normalised float images + labels) into a ring of `depth` slots while the
// training step runs, so the next batch is ready when the step ends. With
// `workers` > 1 it splits each batch's samples into that many contiguous parts
// and assembles them on as many threads (itself and workers - 1 helpers), as
// a data loader's workers do: reading and augmenting ImageNet-sized samples
// costs milliseconds per batch (synthesising 128 of them: 11.6 ms on one Zen 4
// core), a sizeable part of a GPU's resnet50 bf16 step (~47 ms of kernels).
//
// Protocol: begin(count, plan[, transform]) starts a sequence of `count`
// batches whose indices come from plan(k, out). If given, transform(k, indices,
// images) then edits batch k's images ([n, C, H, W] fp32, n = indices.size())
// in place (augmentation). next() returns batch k in order; the batch stays
// valid until the following next() or begin(). Producer errors, the plan's,
// the dataset's and the transform's included, are rethrown from next().
// Concurrency: plan runs on the producer thread only, one batch after
// another; with workers > 1, Dataset::fill and transform run concurrently on
// disjoint parts of one batch (transform(k, part_indices, part_images)), so
// both must treat samples independently (fill is const; the trainer's
// augmentation is keyed by sample index). The batch is the same for any
// number of workers.
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
  Tensor inputs;  // [n, C, H, W] fp32 images, or [n, T] int32 tokens
  Tensor labels;  // [n] int32 classes, or [n, T] int32 next tokens
  int64_t index = 0;  // position in the sequence
  int64_t size() const { return labels.size(0); }  // samples
};

class PrefetchLoader {
 public:
  using Plan = std::function<void(int64_t k, std::vector<int64_t>& indices)>;
  using Transform = std::function<void(int64_t k, std::span<const int64_t> indices, float* images)>;

  // `host`: where the batch slots live (page-locked memory from the GPU path,
  // so host -> device copies of a batch are asynchronous DMA).
  PrefetchLoader(const Dataset& data, int64_t max_batch, int depth = 3,
                 std::shared_ptr<Allocator> host = cpu_allocator(), int workers = 1);
  ~PrefetchLoader();
  PrefetchLoader(const PrefetchLoader&) = delete;
  PrefetchLoader& operator=(const PrefetchLoader&) = delete;

  void begin(int64_t count, Plan plan, Transform transform = {});
  const Batch& next();
  // Seconds the consumer spent blocked in next() since the last call (data wait).
  double take_wait_seconds();
  int workers() const { return workers_; }

 private:
  // One batch's assembly, split into `parts` contiguous ranges of samples.
  struct Job {
    int64_t k = 0;
    std::span<const int64_t> indices;
    Batch* slot = nullptr;
    const Transform* transform = nullptr;
    int parts = 1;
  };
  void run();
  void assemble(const Job& job);              // on the producer: its part 0, the helpers' parts, errors rethrown
  void assemble_part(const Job& job, int p) const;
  void help(int part);                        // helper thread `part` (1 .. workers - 1)

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

  // The helpers: a new job (generation) wakes them; the producer waits until
  // parts_left_ (its helpers' parts) is 0.
  const int workers_;
  std::mutex pool_mu_;
  std::condition_variable pool_cv_, pool_done_cv_;
  Job job_;
  uint64_t generation_ = 0;
  int parts_left_ = 0;
  std::vector<std::exception_ptr> part_errors_;
  bool pool_stop_ = false;
  std::vector<std::thread> helpers_;
  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace lockstep
