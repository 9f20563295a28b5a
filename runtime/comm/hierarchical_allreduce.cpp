// The ordered allreduce in two levels: within hosts, and along a chain of hosts.
#include "comm/hierarchical_allreduce.h"

#include <algorithm>
#include <cstring>

#include "comm/mpi_exchange.h"
#include "comm/ordered_sum.h"
#include "comm/ownership.h"
#include "comm/wire_convert.h"

namespace lockstep {
namespace {

constexpr int kPartialTag = 0, kSumsTag = 1, kOwnedTag = 2;  // on the cross-host communicator
constexpr int kScatterTag = 0, kGatherTag = 1;                // on the host's communicator
// Partial sums in flight per rank. MPI shares a link between all pending
// sends: with every piece's posted at once, the first arrived only as the
// last did, and the next host could not start adding (64 MB across a 1 Gbit/s
// link, 2 hosts x 2 ranks: 1096 ms). One in flight while the next piece is
// summed: 578-586 ms; two: 613-632; four: 651-662 (docs/performance.md).
constexpr int64_t kPartialsInFlight = 1;
// Pieces of a call that go down the chain one after another: at least 16 per
// call, so that even a 1 MB bucket's partial sums and finished sums cross a
// link at the same time, and 64K to 256K elements each. The sums do not
// depend on it. 2 hosts x 2 ranks, medians of 2, 256K-element pieces always
// against 64K always: 1 MB 12.1 vs 10.1 ms at 1 Gbit/s and 123 vs 91 ms at
// 100 Mbit/s, 4 MB 47.5 vs 38.3 and 492 vs 357 ms, but 64 MB at 1 Gbit/s
// 598 vs 762 ms. This rule, in a later run: 1 MB 11.4, 4 MB 45.1, 64 MB 588.
int64_t piece_elements(int64_t n) { return std::clamp<int64_t>(n / 16, int64_t{1} << 16, kReduceSegment); }

// Persistent, pre-touched scratch of at least `bytes` (never empty: a rank's
// slices of a short call can be).
void grow(Tensor& buf, int64_t bytes) {
  bytes = std::max<int64_t>(bytes, 4);
  if (static_cast<int64_t>(buf.nbytes()) < bytes) buf = Tensor::zeros(Shape{bytes}, DType::U8);
}

void free_comm(MPI_Comm& c) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && c != MPI_COMM_NULL) MPI_Comm_free(&c);
}

}  // namespace

HierarchicalAllreduce::HierarchicalAllreduce(MPI_Comm comm, int ranks_per_host) : per_host_(ranks_per_host) {
  int rank = 0, size = 1;
  LS_MPI(MPI_Comm_rank(comm, &rank));
  LS_MPI(MPI_Comm_size(comm, &size));
  LS_CHECK(per_host_ >= 2 && size % per_host_ == 0 && size / per_host_ >= 2,
           "hierarchical allreduce needs at least 2 hosts of the same number (at least 2) of ranks: {} ranks, {} per host",
           size, per_host_);
  hosts_ = size / per_host_;
  host_ = rank / per_host_;
  local_rank_ = rank % per_host_;
  LS_MPI(MPI_Comm_split(comm, host_, rank, &local_));
  LS_MPI(MPI_Comm_split(comm, local_rank_, rank, &cross_));
  LS_MPI(MPI_Comm_set_errhandler(local_, MPI_ERRORS_RETURN));
  LS_MPI(MPI_Comm_set_errhandler(cross_, MPI_ERRORS_RETURN));
  src_.resize(static_cast<size_t>(per_host_) + 1);
}

HierarchicalAllreduce::~HierarchicalAllreduce() {
  free_comm(local_);
  free_comm(cross_);
}

void HierarchicalAllreduce::run(Tensor& t, WireType wire) {
  LS_CHECK(t.dtype() == DType::F32 && t.device().is_cpu(),
           "hierarchical allreduce needs a host F32 tensor, got {} on {}", dtype_name(t.dtype()), t.device().str());
  const int64_t n = t.numel();
  if (n == 0) return;
  const int L = per_host_, l = local_rank_;
  const bool first_host = host_ == 0, last_host = host_ == hosts_ - 1;
  const bool narrow = wire != WireType::F32;
  const int64_t esize = narrow ? 2 : 4;
  const MPI_Datatype type = narrow ? MPI_UINT16_T : MPI_FLOAT;
  const int64_t S = piece_elements(n);
  const int64_t K = (n + S - 1) / S;
  float* data = t.data<float>();
  auto seg_len = [&](int64_t k) { return std::min(S, n - k * S); };
  auto first = [&](int64_t len, int j) { return len * j / L; };  // slice j of a piece of len
  // at[k]: where my slice of piece k starts among my slices of the call.
  std::vector<int64_t> at(static_cast<size_t>(K) + 1, 0);
  for (int64_t k = 0; k < K; ++k) at[k + 1] = at[k] + first(seg_len(k), l + 1) - first(seg_len(k), l);
  const int64_t largest = (S + L - 1) / L;
  grow(slots_, L * largest * esize);
  grow(partial_, at[K] * 4);
  grow(sums_, at[K] * esize);
  if (narrow) {
    grow(w16_, S * 2);
    grow(wide_, L * largest * 4);
  }
  char* slots = static_cast<char*>(slots_.raw_data());
  float* partial = static_cast<float*>(partial_.raw_data());
  char* sums = static_cast<char*>(sums_.raw_data());
  uint16_t* w16 = narrow ? static_cast<uint16_t*>(w16_.raw_data()) : nullptr;
  float* wide = narrow ? static_cast<float*>(wide_.raw_data()) : nullptr;
  const int prev = host_ - 1, next = host_ + 1, sums_from = first_host ? hosts_ - 1 : host_ - 1;
  auto count = [](int64_t c) { return static_cast<int>(c); };

  // Receives for the whole call, matched in piece order (MPI keeps the order
  // of messages between two ranks on one tag).
  partial_in_.assign(static_cast<size_t>(K), MPI_REQUEST_NULL);
  partial_out_.assign(static_cast<size_t>(K), MPI_REQUEST_NULL);
  sums_in_.assign(static_cast<size_t>(K), MPI_REQUEST_NULL);
  sums_out_.assign(static_cast<size_t>(K), MPI_REQUEST_NULL);
  for (int64_t k = 0; k < K; ++k) {
    const int m = count(at[k + 1] - at[k]);
    if (!first_host) LS_MPI(MPI_Irecv(partial + at[k], m, MPI_FLOAT, prev, kPartialTag, cross_, &partial_in_[k]));
    if (!last_host) LS_MPI(MPI_Irecv(sums + at[k] * esize, m, type, sums_from, kSumsTag, cross_, &sums_in_[k]));
  }

  // Steps 1 and 2, every piece: the host's copies of my slice here, added
  // in rank order after the previous host's partial sum, and passed on.
  for (int64_t k = 0; k < K; ++k) {
    float* seg = data + k * S;
    const int64_t len = seg_len(k), m = at[k + 1] - at[k];
    char* send = reinterpret_cast<char*>(seg);
    if (narrow) {
      floats_to_wire(seg, len, wire, w16);
      send = reinterpret_cast<char*>(w16);
    }
    exchange_with_all(
        local_, l, L, kScatterTag, type, [&](int j) { return slots + j * largest * esize; },
        [&](int) { return count(m); }, [&](int j) { return send + first(len, j) * esize; },
        [&](int j) { return count(first(len, j + 1) - first(len, j)); }, reqs_);
    float* out = seg + first(len, l);
    int nsrc = 0;
    if (!first_host) {
      wait_all(&partial_in_[k], 1);
      src_[nsrc++] = partial + at[k];
    }
    for (int j = 0; j < L; ++j) {
      if (!narrow) {  // the own copy is read in place (sum_in_rank_order reads before it writes)
        src_[nsrc++] = j == l ? out : reinterpret_cast<const float*>(slots + j * largest * esize);
        continue;
      }
      const uint16_t* h = j == l ? w16 + first(len, l) : reinterpret_cast<const uint16_t*>(slots + j * largest * 2);
      wire_to_floats(h, m, wire, wide + j * largest);
      src_[nsrc++] = wide + j * largest;
    }
    sum_in_rank_order(src_.data(), nsrc, m, out);
    if (!last_host) {
      if (k >= kPartialsInFlight) wait_all(&partial_out_[k - kPartialsInFlight], 1);
      LS_MPI(MPI_Isend(out, count(m), MPI_FLOAT, next, kPartialTag, cross_, &partial_out_[k]));
      continue;
    }
    // The sums are finished here: to host 0, in the wire type.
    const void* done = out;
    if (narrow) {
      floats_to_wire(out, m, wire, reinterpret_cast<uint16_t*>(sums + at[k] * 2));
      done = sums + at[k] * 2;
    }
    LS_MPI(MPI_Isend(done, count(m), type, 0, kSumsTag, cross_, &sums_out_[k]));
  }

  // Steps 3 and 4, every piece: the sums of my slice (passed on round the
  // hosts), then the host's slices to every rank of the host.
  for (int64_t k = 0; k < K; ++k) {
    float* seg = data + k * S;
    const int64_t len = seg_len(k), m = at[k + 1] - at[k];
    float* out = seg + first(len, l);
    if (!last_host) {
      wait_all(&sums_in_[k], 1);
      if (next < hosts_ - 1)
        LS_MPI(MPI_Isend(sums + at[k] * esize, count(m), type, next, kSumsTag, cross_, &sums_out_[k]));
      wait_all(&partial_out_[k], 1);  // `out` is still being sent as a partial sum
      if (!narrow) std::memcpy(out, sums + at[k] * 4, static_cast<size_t>(m) * 4);
    }
    char* gather = reinterpret_cast<char*>(seg);
    if (narrow) {
      std::memcpy(w16 + first(len, l), sums + at[k] * 2, static_cast<size_t>(m) * 2);
      gather = reinterpret_cast<char*>(w16);
    }
    exchange_with_all(
        local_, l, L, kGatherTag, type, [&](int j) { return gather + first(len, j) * esize; },
        [&](int j) { return count(first(len, j + 1) - first(len, j)); },
        [&](int) { return gather + first(len, l) * esize; }, [&](int) { return count(m); }, reqs_);
    if (narrow) wire_to_floats(w16, len, wire, seg);
  }
  wait_all(sums_out_);
  wait_all(partial_out_);
}

void HierarchicalAllreduce::allgather_owned(Tensor& t) {
  LS_CHECK(t.dtype() == DType::F32 && t.device().is_cpu(),
           "hierarchical allgather needs a host F32 tensor, got {} on {}", dtype_name(t.dtype()), t.device().str());
  const int L = per_host_, N = hosts_ * per_host_, me = host_ * L + local_rank_;
  constexpr int64_t S = kReduceSegment;
  for (int64_t s0 = 0; s0 < t.numel(); s0 += S) {
    float* seg = t.data<float>() + s0;
    const int64_t len = std::min(S, t.numel() - s0);
    auto at = [&](int r) { return seg + len * r / N; };  // rank r's chunk (comm/ownership.h)
    auto count = [&](int r) { return static_cast<int>(len * (r + 1) / N - len * r / N); };
    // Across hosts: my chunk to my counterpart on every other host, theirs here.
    reqs_.clear();
    for (int g = 0; g < hosts_; ++g) {
      if (g == host_) continue;
      const int r = g * L + local_rank_;
      reqs_.emplace_back();
      LS_MPI(MPI_Irecv(at(r), count(r), MPI_FLOAT, g, kOwnedTag, cross_, &reqs_.back()));
      reqs_.emplace_back();
      LS_MPI(MPI_Isend(at(me), count(me), MPI_FLOAT, g, kOwnedTag, cross_, &reqs_.back()));
    }
    wait_all(reqs_);
    // Within the host: the chunks of every host's rank with my local index to
    // the other local ranks; theirs here.
    reqs_.clear();
    for (int j = 0; j < L; ++j) {
      if (j == local_rank_) continue;
      for (int g = 0; g < hosts_; ++g) {
        const int theirs = g * L + j, mine = g * L + local_rank_;
        reqs_.emplace_back();
        LS_MPI(MPI_Irecv(at(theirs), count(theirs), MPI_FLOAT, j, kGatherTag, local_, &reqs_.back()));
        reqs_.emplace_back();
        LS_MPI(MPI_Isend(at(mine), count(mine), MPI_FLOAT, j, kGatherTag, local_, &reqs_.back()));
      }
    }
    wait_all(reqs_);
  }
}

}  // namespace lockstep
