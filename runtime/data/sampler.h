// Which samples each rank reads.
//
// Training: epoch e uses a permutation of [0, size) drawn from (seed, e).
// Global batch g (one optimizer step) is perm[g*G, (g+1)*G); rank r reads its
// contiguous shard [r*G/W, (r+1)*G/W) of it. So the set of samples in a global
// batch is the same at any world size, and every rank runs exactly
// floor(size / G) steps per epoch (the partial last global batch is dropped
// everywhere). With gradient accumulation over K micro-batches, a rank's shard
// is read in K consecutive pieces of B = G / (W K) samples: the samples of one
// step are the same as without accumulation.
//
// Evaluation: rank r reads the contiguous range [r*size/W, (r+1)*size/W) of the
// data set in order, in batches of at most B, so the whole set is seen exactly once.
#pragma once

#include <cstdint>
#include <vector>

namespace lockstep {

class TrainSampler {
 public:
  TrainSampler(int64_t dataset_size, int64_t global_batch, int world_size, int rank, uint64_t seed, bool shuffle = true,
               int micro_batches = 1);
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t global_batch() const { return global_batch_; }
  int64_t local_batch() const { return local_batch_; }  // samples per micro-batch on this rank
  int micro_batches() const { return micro_batches_; }
  // Position of this rank's micro-batch `micro` within the global batch.
  int64_t shard_offset(int micro = 0) const {
    return static_cast<int64_t>(rank_) * local_batch_ * micro_batches_ + micro * local_batch_;
  }
  // This rank's sample indices for (epoch, step, micro); step < steps_per_epoch().
  void indices(int64_t epoch, int64_t step, std::vector<int64_t>& out, int micro = 0);

 private:
  int64_t size_, global_batch_, local_batch_, steps_per_epoch_;
  int rank_;
  uint64_t seed_;
  bool shuffle_;
  int micro_batches_;
  int64_t perm_epoch_ = -1;
  std::vector<int64_t> perm_;
};

class EvalSampler {
 public:
  EvalSampler(int64_t dataset_size, int64_t local_batch, int world_size, int rank);
  int64_t batches() const { return batches_; }
  int64_t samples() const { return end_ - begin_; }  // on this rank
  void indices(int64_t batch, std::vector<int64_t>& out) const;

 private:
  int64_t begin_, end_, local_batch_, batches_;
};

}  // namespace lockstep
