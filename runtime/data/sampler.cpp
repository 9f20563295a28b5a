// Samplers: per-epoch Fisher-Yates permutation from a counter-based RNG.
#include "data/sampler.h"

#include <numeric>

#include "core/error.h"
#include "core/hash.h"
#include "core/rng.h"
#include "tensor/allocator.h"

namespace lockstep {

TrainSampler::TrainSampler(int64_t dataset_size, int64_t global_batch, int world_size, int rank, uint64_t seed,
                           bool shuffle, int micro_batches)
    : size_(dataset_size), global_batch_(global_batch), rank_(rank), seed_(seed), shuffle_(shuffle),
      micro_batches_(micro_batches) {
  LS_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "rank {} of world {}", rank, world_size);
  LS_CHECK(micro_batches >= 1, "micro-batches {} must be positive", micro_batches);
  LS_CHECK_INPUT(global_batch > 0 && global_batch % (static_cast<int64_t>(world_size) * micro_batches) == 0,
                 "global batch {} does not split evenly over {} ranks x {} micro-batches", global_batch, world_size,
                 micro_batches);
  LS_CHECK_INPUT(global_batch <= dataset_size, "global batch {} is larger than the data set ({} samples)",
                 global_batch, dataset_size);
  local_batch_ = global_batch / world_size / micro_batches;
  steps_per_epoch_ = dataset_size / global_batch;
  // The order is a permutation of every sample index, made at the first step:
  // refuse here, with the figures, a data set whose order cannot be held.
  check_host_memory(static_cast<size_t>(dataset_size) * sizeof(int64_t),
                    fmt::format("the shuffled order of {} samples", dataset_size).c_str());
}

void TrainSampler::indices(int64_t epoch, int64_t step, std::vector<int64_t>& out, int micro) {
  LS_CHECK(step >= 0 && step < steps_per_epoch_, "step {} outside the epoch's {} steps", step, steps_per_epoch_);
  LS_CHECK(micro >= 0 && micro < micro_batches_, "micro-batch {} outside [0, {})", micro, micro_batches_);
  if (perm_epoch_ != epoch) {
    perm_.resize(static_cast<size_t>(size_));
    std::iota(perm_.begin(), perm_.end(), int64_t{0});
    if (shuffle_) {
      Rng rng(rng_key(seed_, fnv1a("shuffle"), static_cast<uint64_t>(epoch)));
      for (int64_t i = size_ - 1; i > 0; --i)
        std::swap(perm_[static_cast<size_t>(i)], perm_[rng.below(static_cast<uint64_t>(i + 1))]);
    }
    perm_epoch_ = epoch;
  }
  const int64_t first = step * global_batch_ + shard_offset(micro);
  out.assign(perm_.begin() + first, perm_.begin() + first + local_batch_);
}

EvalSampler::EvalSampler(int64_t dataset_size, int64_t local_batch, int world_size, int rank)
    : local_batch_(local_batch) {
  LS_CHECK(local_batch > 0, "evaluation batch {} must be positive", local_batch);
  begin_ = dataset_size * rank / world_size;
  end_ = dataset_size * (rank + 1) / world_size;
  batches_ = (end_ - begin_ + local_batch - 1) / local_batch;
}

void EvalSampler::indices(int64_t batch, std::vector<int64_t>& out) const {
  const int64_t first = begin_ + batch * local_batch_;
  const int64_t last = std::min(end_, first + local_batch_);
  out.resize(static_cast<size_t>(std::max<int64_t>(0, last - first)));
  std::iota(out.begin(), out.end(), first);
}

}  // namespace lockstep
