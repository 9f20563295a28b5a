// DistributedOptimizer: wraps any Optimizer so that every rank applies the
// same update: gradients are reduced over ranks (summed by the communicator,
// averaged by passing 1/N into the optimizer's own pass), then the wrapped
// optimizer steps. Also broadcasts rank 0's parameters and optimizer state at
// start and on resume.
//
// Gradients are reduced in buckets: contiguous slices of the flat gradient
// buffer in backward order (the last layer's gradients first), cut at
// parameter boundaries and capped at `bucket_bytes`, identical on every rank.
// Here all buckets are reduced when step() is called; the overlapped version
// (buckets launched by the grad-ready hook during backward) changes only the
// internals.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "optim/optimizer.h"

namespace lockstep {

struct DistributedOptions {
  bool average = true;                    // false: sum the gradients
  int64_t bucket_bytes = int64_t{25} << 20;
};

struct Bucket {
  int64_t begin = 0, end = 0;  // elements of the flat gradient buffer
  int64_t numel() const { return end - begin; }
};

// Buckets over a parameter store (pure function of the layout and the cap).
std::vector<Bucket> plan_buckets(const ParameterStore& params, int64_t bucket_bytes);

class DistributedOptimizer {
 public:
  DistributedOptimizer(Optimizer& opt, ParameterStore& params, Communicator& comm, DistributedOptions options = {});

  // Every rank gets rank `root`'s parameters, optimizer state and step count.
  void broadcast_state(int root = 0);
  // Reduce gradients over ranks, then apply one update with learning rate `lr`.
  void step(float lr);

  const std::vector<Bucket>& buckets() const { return buckets_; }
  std::string describe() const;
  Optimizer& optimizer() { return opt_; }

 private:
  Optimizer& opt_;
  ParameterStore& params_;
  Communicator& comm_;
  DistributedOptions options_;
  std::vector<Bucket> buckets_;
};

}  // namespace lockstep
