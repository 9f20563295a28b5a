// Communicator: the collectives the runtime needs, behind one small interface
// (MPI now, NCCL with the GPU path, a trivial one for a world of one).
// All calls are blocking and collective: every rank must make the same calls in
// the same order. Tensors are host tensors, reduced in place.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace lockstep {

enum class ReduceOp { Sum, Average, Min, Max };

// How gradients travel: fp32, or rounded to 16 bits on the wire.
enum class WireType { F32, F16, BF16 };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;  // rank among the processes on this host
  virtual int local_size() const = 0;
  virtual int nodes() const = 0;       // hosts in the job
  virtual std::string backend() const = 0;

  // In place over all ranks. Average = Sum, then x (1/size) in the runtime's own
  // pass (floating types only). Types: F32, F64, I32, I64.
  virtual void allreduce(Tensor& t, ReduceOp op) = 0;
  // Rank `root`'s values everywhere. Any dtype.
  virtual void broadcast(Tensor& t, int root) = 0;
  // out = concatenation of every rank's `in` (same numel and dtype on every rank),
  // rank order; out.numel() == size() * in.numel().
  virtual void allgather(const Tensor& in, Tensor& out) = 0;
  virtual void barrier() = 0;

  // Sum of an F32 tensor over ranks, added in rank order (((x0 + x1) + x2) ...)
  // for every element, whatever the tensor's size or position. So splitting a
  // buffer into any number of calls gives bitwise the same sums, on every rank.
  // With a 16-bit wire type every contribution and the result are rounded to
  // 16 bits (sums accumulate in fp32); all ranks end with the same values.
  virtual void allreduce_sum_ordered(Tensor& t, WireType wire) = 0;
  // Its two halves, for a sharded optimizer (ZeRO-1). reduce_scatter: only the
  // elements this rank owns in t (comm/ownership.h) end with the sums, the
  // same values allreduce_sum_ordered gives them; the rest are left
  // unspecified. allgather_owned: every rank's owned elements of t, exactly,
  // to every rank. Ownership follows the call's range: call both with the
  // same tensors (e.g. bucket slices).
  virtual void reduce_scatter_sum_ordered(Tensor& t, WireType wire) = 0;
  virtual void allgather_owned(Tensor& t) = 0;
  // Asks allreduce_sum_ordered to sum within each host first and then along
  // the hosts (comm/hierarchical_allreduce.h: less traffic between hosts, the
  // same values bitwise). Returns whether this communicator can: the MPI one
  // where the ranks are grouped by host, several on each of several hosts.
  // Duplicates inherit the choice. Not collective; every rank must choose
  // the same.
  virtual bool set_hierarchical_allreduce(bool) { return false; }
  // A communicator over the same ranks whose traffic never mixes with this
  // one's (for a communication thread).
  virtual std::unique_ptr<Communicator> duplicate() const = 0;
  // Collective over the ranks of this host: memory every one of them can
  // read and write (`bytes` per rank, zero-filled). Null when the backend has
  // none or the ranks span several hosts.
  virtual std::shared_ptr<class SharedMemory> allocate_shared(int64_t bytes) { return nullptr; }
};

// Memory shared by the ranks of one host: each rank's own block and a view of
// every other rank's. Freed when the last owner lets go.
class SharedMemory {
 public:
  virtual ~SharedMemory() = default;
  virtual int ranks() const = 0;       // ranks sharing it (all ranks of the communicator)
  virtual int64_t bytes() const = 0;   // per rank
  virtual void* block(int rank) = 0;   // rank's block, mapped in this process
};

// Rounding to 16-bit formats and back (round to nearest even).
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t h);
uint16_t float_to_f16(float f);
float f16_to_float(uint16_t h);
// Rounds every value to the wire type and back, in place.
void round_to_wire(Tensor& t, WireType wire);

// Every rank's string, in rank order (two allgathers: lengths, then bytes).
std::vector<std::string> allgather_strings(Communicator& comm, const std::string& mine);
// Rank `root`'s string on every rank.
std::string broadcast_string(Communicator& comm, const std::string& s, int root);
// allreduce / broadcast of a tensor in host or device memory: a device tensor
// travels through a host copy (off the hot path: state broadcast at start,
// batch-norm buffers before evaluation and saving).
void allreduce_via_host(Communicator& comm, Tensor& t, ReduceOp op);
void broadcast_via_host(Communicator& comm, Tensor& t, int root);
// Convenience reductions of a few scalars.
double allreduce_scalar(Communicator& comm, double v, ReduceOp op);

// The communicator for a world of one: every collective is the identity.
class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  int nodes() const override { return 1; }
  std::string backend() const override { return "single-process"; }
  void allreduce(Tensor& t, ReduceOp op) override;
  void broadcast(Tensor& t, int root) override;
  void allgather(const Tensor& in, Tensor& out) override;
  void barrier() override {}
  void allreduce_sum_ordered(Tensor& t, WireType wire) override { round_to_wire(t, wire); }
  void reduce_scatter_sum_ordered(Tensor& t, WireType wire) override { round_to_wire(t, wire); }
  void allgather_owned(Tensor&) override {}
  std::unique_ptr<Communicator> duplicate() const override { return std::make_unique<SingleProcessCommunicator>(); }
};

}  // namespace lockstep
