// Which rank sums which elements in lockstep's ordered reductions, and so,
// with a sharded optimizer (ZeRO-1), which rank updates them.
//
// Both transports (comm/ordered_allreduce.h over messages, comm/shm_allreduce.h
// through shared memory) cut every call's range [begin, end) into segments of
// kReduceSegment elements from `begin`, and split each segment of `len`
// elements into `size` chunks: rank r owns [len*r/size, len*(r+1)/size). The
// owner adds the ranks' contributions in rank order. A reduce-scatter leaves
// the sums in the owners' chunks only; an allgather of the owners' chunks
// completes them everywhere.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace lockstep {

// Elements per segment: 1 MB of fp32 (measured best of 1, 4 and 16 MB for
// 4-256 MB buffers at 2 ranks; docs/performance.md). The sums do not depend
// on it; the ownership of elements does.
constexpr int64_t kReduceSegment = int64_t{1} << 18;

struct ElementRange {
  int64_t begin = 0, end = 0;
  int64_t numel() const { return end - begin; }
  bool operator==(const ElementRange&) const = default;
};

// Calls f(begin, end) for each non-empty chunk of [begin, end) that `rank` of
// `size` owns, in order.
template <typename F>
void for_each_owned(int64_t begin, int64_t end, int rank, int size, F&& f) {
  for (int64_t s0 = begin; s0 < end; s0 += kReduceSegment) {
    const int64_t len = std::min(kReduceSegment, end - s0);
    const int64_t b = s0 + len * rank / size, e = s0 + len * (rank + 1) / size;
    if (e > b) f(b, e);
  }
}

// The chunks `rank` owns when each of `calls` (ranges of one buffer, in
// increasing order, e.g. gradient buckets) is reduced by its own call;
// adjacent chunks merged.
inline std::vector<ElementRange> owned_ranges(const std::vector<ElementRange>& calls, int rank, int size) {
  std::vector<ElementRange> out;
  for (const ElementRange& c : calls)
    for_each_owned(c.begin, c.end, rank, size, [&](int64_t b, int64_t e) {
      if (!out.empty() && out.back().end == b)
        out.back().end = e;
      else
        out.push_back({b, e});
    });
  return out;
}

}  // namespace lockstep
