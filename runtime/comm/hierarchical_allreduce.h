// HierarchicalAllreduce: the ordered sum of comm/ordered_allreduce.h across
// hosts in two levels, so that each host's link carries the buffer about once
// each way instead of about 2L(H-1)/H times (L ranks on each of H hosts).
// The values are bitwise those of the flat path: every element is still added
// in rank order, ((x0 + x1) + x2) + ... (Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE
// sums within hosts and then across them, which changes the order.)
//
// Needs the ranks grouped by host: host h holds ranks [h*L, (h+1)*L), the
// same L on every host (mpirun's default mapping by slot). Per piece of the
// call (256 KB to 1 MB, at least 16 pieces per call; the sums do not depend on
// it), local rank l of every host takes the l-th of L slices:
//   1. within the host, every rank's copy of slice l goes to local rank l;
//   2. host 0 sums its L copies in rank order and sends that partial sum
//      (fp32, exact) to local rank l of host 1, which goes on adding its own
//      ranks' copies in rank order and passes it to host 2, and so on;
//   3. the last host then holds the sums; they travel round the hosts
//      (H-1 -> 0 -> 1 -> ... -> H-2) in the wire type;
//   4. within the host, an allgather of the L slices.
// Steps 1-2 run over every piece without waiting for the sums of step 3,
// so partial sums of later pieces flow one way while finished sums of
// earlier ones flow back: both directions of a link are busy at once.
//
// With a 16-bit wire the contributions and the sums travel in 16 bits, but
// the partial sums of step 2 travel in fp32 (rounding them would change the
// sums): per element, 4 bytes one way and 2 the other across a link, against
// the flat path's 4L(H-1)/H each way.
//
// ZeRO-1's allgather of the chunks each rank owns (comm/ownership.h, the flat
// rule) also goes in two levels: each rank sends its chunks to the rank with
// its local index on every other host, then the host's ranks share what they
// hold. A host's link carries the other hosts' chunks once, (H-1)/H of the
// buffer, instead of L times that.
//
// Owns its two MPI communicators (the ranks of this host; the ranks with this
// local rank, one per host). One object per communicator; not safe to call
// from two threads at once.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "comm/communicator.h"

namespace lockstep {

class HierarchicalAllreduce {
 public:
  // Collective over `comm`: hosts of `ranks_per_host` consecutive ranks.
  // Needs at least 2 hosts of at least 2 ranks.
  HierarchicalAllreduce(MPI_Comm comm, int ranks_per_host);
  ~HierarchicalAllreduce();
  HierarchicalAllreduce(const HierarchicalAllreduce&) = delete;
  HierarchicalAllreduce& operator=(const HierarchicalAllreduce&) = delete;

  int hosts() const { return hosts_; }
  int ranks_per_host() const { return per_host_; }

  // t (host, F32) <- the sum of every rank's t, rounded through `wire`:
  // bitwise OrderedAllreduce::run(t, wire).
  void run(Tensor& t, WireType wire);
  // Every rank's owned chunks of t (comm/ownership.h), exactly, to every
  // rank: OrderedAllreduce::run(t, F32, Phases::Allgather).
  void allgather_owned(Tensor& t);

 private:
  MPI_Comm local_ = MPI_COMM_NULL;  // this host's ranks, in rank order
  MPI_Comm cross_ = MPI_COMM_NULL;  // local rank l of every host, in host order
  int host_ = 0, hosts_ = 1, local_rank_ = 0, per_host_ = 1;
  std::vector<MPI_Request> reqs_;
  std::vector<MPI_Request> partial_in_, partial_out_, sums_in_, sums_out_;  // per piece
  std::vector<const float*> src_;
  Tensor slots_;    // [L][largest slice] wire type: the host's copies of my slice of a piece
  Tensor w16_;      // [piece] the piece in the wire type (16-bit wires only)
  Tensor wide_;     // [L][largest slice] fp32 copies to sum (16-bit wires only)
  Tensor partial_;  // [my slices of the call] fp32: the partial sums from the previous host
  Tensor sums_;     // [my slices of the call] wire type: the finished sums
};

}  // namespace lockstep
