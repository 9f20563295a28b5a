// MpiCommunicator: the Communicator over MPI (CPU tensors). Errors come back
// as exceptions with MPI's message and the source location (the communicator
// uses MPI_ERRORS_RETURN); counts beyond MPI's int are split into chunks.
#pragma once

#include <mpi.h>

#include <memory>

#include "comm/communicator.h"
#include "comm/hierarchical_allreduce.h"
#include "comm/ordered_allreduce.h"

namespace lockstep {

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates `parent`. Hosts are found by MPI (MPI_COMM_TYPE_SHARED), or,
  // with ranks_per_host > 0, taken to be groups of that many consecutive ranks
  // (tests emulate several hosts on one; only the hierarchical allreduce sees it).
  explicit MpiCommunicator(MPI_Comm parent, int ranks_per_host = 0);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  int nodes() const override { return nodes_; }
  std::string backend() const override { return "mpi"; }

  void allreduce(Tensor& t, ReduceOp op) override;
  void broadcast(Tensor& t, int root) override;
  void allgather(const Tensor& in, Tensor& out) override;
  void barrier() override;
  // comm/ordered_allreduce.h: reduce-scatter with sums in rank order, then
  // allgather, one 1 MB segment at a time. Not safe to call from two threads
  // at once on one communicator.
  void allreduce_sum_ordered(Tensor& t, WireType wire) override;
  void reduce_scatter_sum_ordered(Tensor& t, WireType wire) override;
  void allgather_owned(Tensor& t) override;
  // Where the ranks are grouped by host (host h holds ranks [h*L, (h+1)*L)),
  // at least 2 on each of at least 2 hosts, allreduce_sum_ordered and the
  // allgather of owned chunks can go in two levels
  // (comm/hierarchical_allreduce.h); the reduce-scatter then is the whole
  // hierarchical allreduce (a superset of its contract).
  bool set_hierarchical_allreduce(bool on) override;
  std::unique_ptr<Communicator> duplicate() const override;
  // MPI_Win_allocate_shared over this communicator when all ranks share a host.
  std::shared_ptr<SharedMemory> allocate_shared(int64_t bytes) override;

  MPI_Comm handle() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, nodes_ = 1;
  int ranks_per_host_ = 0;  // as given: 0 = the real hosts
  std::unique_ptr<OrderedAllreduce> ordered_;  // allreduce_sum_ordered, with its persistent buffers
  std::unique_ptr<HierarchicalAllreduce> hierarchical_;  // where the ranks' grouping allows it
  bool use_hierarchical_ = false;
};

}  // namespace lockstep
