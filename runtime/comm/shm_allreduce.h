// ShmAllreduce: sums over the ranks of one host straight out of each other's
// memory. Every rank's data (the gradient buffer) lives in a SharedMemory
// block; for each segment, the owner of a chunk reads that chunk from every
// rank's block, adds in rank order into its own block, and then every rank
// copies the other owners' sums from their blocks. Compared with message
// passing this skips one copy of the data (MPI copies a chunk in before it
// can be summed), and the order of every sum is the same as in
// Communicator::allreduce_sum_ordered, so both paths agree bitwise.
//
// Ranks coordinate through three counters per rank (ready, done, copied) in
// the shared block, stepping through the same sequence of segments. Before a
// rank overwrites its data again (the next backward), wait_readers() waits
// until every rank has finished reading it.
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace lockstep {

class ShmAllreduce {
 public:
  // Each rank's block holds a 4 KiB header (the counters) then its data.
  static constexpr int64_t kHeaderBytes = 4096;

  ShmAllreduce(std::shared_ptr<SharedMemory> memory, int rank);
  // Data of `rank`: the block after the header.
  float* data(int rank) const;
  // Sums elements [begin, end) over ranks; every rank calls with the same ranges.
  void reduce(int64_t begin, int64_t end) { run(begin, end, true, true); }
  // The two halves (ZeRO-1, comm/ownership.h): the sums into the chunks this
  // rank owns only; then every owner's chunks copied to every rank.
  void reduce_scatter(int64_t begin, int64_t end) { run(begin, end, true, false); }
  void allgather(int64_t begin, int64_t end) { run(begin, end, false, true); }
  // Returns once every rank has finished reading this rank's data.
  void wait_readers();

 private:
  void run(int64_t begin, int64_t end, bool sum, bool gather);
  void publish(int which, uint64_t seq);
  void wait_all(int which, uint64_t seq);

  std::shared_ptr<SharedMemory> mem_;
  int rank_, ranks_;
  uint64_t seq_ = 0;  // segments reduced so far (the same on every rank)
};

}  // namespace lockstep
