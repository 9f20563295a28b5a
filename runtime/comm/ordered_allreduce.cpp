// The ordered allreduce over MPI point-to-point messages, one segment at a time.
#include "comm/ordered_allreduce.h"

#include <algorithm>

#include "comm/mpi_exchange.h"
#include "comm/ordered_sum.h"
#include "comm/wire_convert.h"

namespace lockstep {

OrderedAllreduce::OrderedAllreduce(MPI_Comm comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {
  reqs_.reserve(static_cast<size_t>(2 * (size - 1)));
  src_.resize(static_cast<size_t>(size));
}

void OrderedAllreduce::run(Tensor& t, WireType wire, Phases phases) {
  LS_CHECK(t.dtype() == DType::F32 && t.device().is_cpu(), "ordered allreduce needs a host F32 tensor, got {} on {}",
           dtype_name(t.dtype()), t.device().str());
  if (phases == Phases::Allgather) wire = WireType::F32;  // owners' results travel exactly
  if (size_ == 1) {
    round_to_wire(t, wire);
    return;
  }
  // Every element is summed in rank order whatever the segments, so results
  // do not depend on kSegment.
  float* data = t.data<float>();
  for (int64_t off = 0; off < t.numel(); off += kSegment)
    reduce_segment(data + off, std::min(kSegment, t.numel() - off), wire, phases);
}

template <typename RecvAt, typename RecvCount, typename SendAt, typename SendCount>
void OrderedAllreduce::exchange(int tag, MPI_Datatype type, RecvAt recv_at, RecvCount recv_count, SendAt send_at,
                                SendCount send_count) {
  exchange_with_all(comm_, rank_, size_, tag, type, recv_at, recv_count, send_at, send_count, reqs_);
}

void OrderedAllreduce::reduce_segment(float* data, int64_t n, WireType wire, Phases phases) {
  const int N = size_, me = rank_;
  auto first = [&](int r) { return n * r / N; };  // comm/ownership.h
  const int64_t mine = first(me + 1) - first(me), largest = (n + N - 1) / N;
  const bool narrow = wire != WireType::F32;
  const int64_t esize = narrow ? 2 : 4;
  const MPI_Datatype type = narrow ? MPI_UINT16_T : MPI_FLOAT;
  // Persistent, pre-touched buffers: fresh ones would page-fault on every call.
  if (static_cast<int64_t>(recv_.nbytes()) < N * largest * esize)
    recv_ = Tensor::zeros(Shape{N * largest * esize}, DType::U8);
  char* slots = static_cast<char*>(recv_.raw_data());
  char* send = reinterpret_cast<char*>(data);
  uint16_t* w16 = nullptr;
  if (narrow) {
    if (static_cast<int64_t>(w16_.nbytes()) < n * 2) w16_ = Tensor::zeros(Shape{n * 2}, DType::U8);
    if (static_cast<int64_t>(wide_.nbytes()) < N * largest * 4) wide_ = Tensor::zeros(Shape{N * largest * 4}, DType::U8);
    w16 = static_cast<uint16_t*>(w16_.raw_data());
    floats_to_wire(data, n, wire, w16);
    send = reinterpret_cast<char*>(w16);
  }
  auto chunk_at = [&](int r) { return send + first(r) * esize; };
  auto chunk_count = [&](int r) { return static_cast<int>(first(r + 1) - first(r)); };
  auto slot_at = [&](int r) { return slots + r * largest * esize; };  // rank r's copy of my chunk
  auto mine_at = [&](int) { return chunk_at(me); };
  auto mine_count = [&](int) { return static_cast<int>(mine); };
  if (phases == Phases::Allgather) {  // fp32: the owners' chunks are final
    exchange(1, type, chunk_at, chunk_count, mine_at, mine_count);
    return;
  }
  // Phase 1: every other rank's chunk to it; every other rank's copy of mine here.
  exchange(0, type, slot_at, mine_count, chunk_at, chunk_count);
  // Sum this rank's chunk in rank order.
  float* out = data + first(me);
  if (!narrow) {
    // The own contribution is read in place: sum_in_rank_order reads every
    // source of an element before writing it.
    for (int r = 0; r < N; ++r)
      src_[static_cast<size_t>(r)] = r == me ? out : reinterpret_cast<const float*>(slot_at(r));
    sum_in_rank_order(src_.data(), N, mine, out);
  } else {
    float* wide = static_cast<float*>(wide_.raw_data());
    for (int r = 0; r < N; ++r) {
      const uint16_t* h = r == me ? w16 + first(me) : reinterpret_cast<const uint16_t*>(slot_at(r));
      wire_to_floats(h, mine, wire, wide + r * largest);
      src_[static_cast<size_t>(r)] = wide + r * largest;
    }
    sum_in_rank_order(src_.data(), N, mine, out);
    floats_to_wire(out, mine, wire, w16 + first(me));
  }
  if (phases == Phases::ReduceScatter) {
    // The sums as the allgather would deliver them: rounded through the wire.
    if (narrow) wire_to_floats(w16 + first(me), mine, wire, out);
    return;
  }
  // Phase 2: every owner's sums to everyone, in place.
  exchange(1, type, chunk_at, chunk_count, mine_at, mine_count);
  if (narrow) wire_to_floats(w16, n, wire, data);
}

}  // namespace lockstep
