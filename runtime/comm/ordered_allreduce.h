// OrderedAllreduce: the sum over ranks of a host F32 tensor by message passing,
// with every element summed in rank order (so the result is the same bitwise
// as the shared-memory path's and does not depend on timing or on how a
// tensor is cut into calls). Per segment of the tensor: a direct reduce-scatter (each rank sends
// every other rank that rank's chunk; the owner adds the N contributions in
// rank order), then an in-place allgather of the owners' sums. Bandwidth-
// optimal like a ring: each rank sends and receives 2(N-1)/N of the bytes.
//
// Segments go one after another. Keeping several in flight (2 or 4) was
// measured slower, through shared memory and over a 1 Gbit/s link alike
// (docs/performance.md, "Pipelining segments"). Optionally the data travels as
// bf16 or fp16 (WireType), summed in fp32.
//
// One object per communicator; not safe to call from two threads at once.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "comm/ownership.h"

namespace lockstep {

class OrderedAllreduce {
 public:
  // Elements per segment (comm/ownership.h). Segments keep the receive space
  // and the data being summed in cache (one pass over a 256 MB buffer
  // otherwise streams it through memory several times).
  static constexpr int64_t kSegment = kReduceSegment;
  // Both phases, or one half (ZeRO-1): the reduce-scatter leaves the sums in
  // this rank's chunks only (rounded through the wire type as the allreduce
  // would); the allgather copies every owner's chunks (fp32) to every rank.
  enum class Phases { Both, ReduceScatter, Allgather };
  OrderedAllreduce(MPI_Comm comm, int rank, int size);
  OrderedAllreduce(const OrderedAllreduce&) = delete;
  OrderedAllreduce& operator=(const OrderedAllreduce&) = delete;

  // t (host, F32) <- the sum of every rank's t, rounded through `wire`.
  void run(Tensor& t, WireType wire, Phases phases = Phases::Both);

 private:
  // `count` elements at `data`: one segment of the tensor being reduced.
  void reduce_segment(float* data, int64_t count, WireType wire, Phases phases);
  // Posts receives of recv_count(r) elements at recv_at(r) and sends of
  // send_count(r) from send_at(r) for every other rank r; waits for all.
  template <typename RecvAt, typename RecvCount, typename SendAt, typename SendCount>
  void exchange(int tag, MPI_Datatype type, RecvAt recv_at, RecvCount recv_count, SendAt send_at, SendCount send_count);

  MPI_Comm comm_;
  int rank_, size_;
  std::vector<MPI_Request> reqs_;
  std::vector<const float*> src_;  // [size] the sources of this rank's sums
  Tensor recv_;  // [size][largest chunk] in the wire type: rank r's copy of this rank's chunk
  Tensor w16_;   // [segment] the segment in the wire type (16-bit wires only)
  Tensor wide_;  // [size][largest chunk] fp32 copies to sum (16-bit wires only)
};

}  // namespace lockstep
