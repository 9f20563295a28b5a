// ShmAllreduce: counters with release/acquire ordering; waits spin briefly,
// then yield the core (the compute thread of the same rank may need it).
#include "comm/shm_allreduce.h"

#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "comm/ordered_sum.h"
#include "comm/ownership.h"
#include "core/error.h"

namespace lockstep {
namespace {

// Segments (comm/ownership.h) are reduced completely one after another, so a
// segment's sums are still in cache when the other ranks copy them.

// Counter `which` (0 ready, 1 done, 2 copied) of a rank's header, each on its own cache line.
uint64_t* counter(void* header, int which) { return reinterpret_cast<uint64_t*>(static_cast<char*>(header) + 64 * which); }

}  // namespace

ShmAllreduce::ShmAllreduce(std::shared_ptr<SharedMemory> memory, int rank)
    : mem_(std::move(memory)), rank_(rank), ranks_(mem_->ranks()) {
  LS_CHECK(rank_ >= 0 && rank_ < ranks_, "rank {} of {} sharing memory", rank_, ranks_);
}

float* ShmAllreduce::data(int rank) const {
  return reinterpret_cast<float*>(static_cast<char*>(mem_->block(rank)) + kHeaderBytes);
}

void ShmAllreduce::publish(int which, uint64_t seq) {
  std::atomic_ref<uint64_t>(*counter(mem_->block(rank_), which)).store(seq, std::memory_order_release);
}

void ShmAllreduce::wait_all(int which, uint64_t seq) {
  for (int r = 0; r < ranks_; ++r) {
    std::atomic_ref<uint64_t> c(*counter(mem_->block(r), which));
    for (int spins = 0; c.load(std::memory_order_acquire) < seq; ++spins) {
      if (spins < 2000)
        _mm_pause();
      else
        sched_yield();
    }
  }
}

void ShmAllreduce::run(int64_t begin, int64_t end, bool sum, bool gather) {
  const int N = ranks_;
  std::vector<const float*> src(static_cast<size_t>(N));
  for (int64_t s0 = begin; s0 < end; s0 += kReduceSegment) {
    const int64_t len = std::min(kReduceSegment, end - s0);
    auto first = [&](int r) { return s0 + len * r / N; };  // comm/ownership.h
    const uint64_t seq = ++seq_;
    publish(0, seq);  // my data for this segment is final
    if (sum) {
      wait_all(0, seq);
      const int64_t mine = first(rank_ + 1) - first(rank_);
      for (int r = 0; r < N; ++r) src[static_cast<size_t>(r)] = data(r) + first(rank_);
      sum_in_rank_order(src.data(), N, mine, data(rank_) + first(rank_));
    }
    publish(1, seq);  // my chunk holds the sums
    if (gather) {
      wait_all(1, seq);
      for (int r = 0; r < N; ++r) {
        if (r == rank_) continue;
        const int64_t n = first(r + 1) - first(r);
        std::memcpy(data(rank_) + first(r), data(r) + first(r), static_cast<size_t>(n) * sizeof(float));
      }
    }
    publish(2, seq);  // I no longer read anyone's data for this segment
  }
}

void ShmAllreduce::wait_readers() { wait_all(2, seq_); }

}  // namespace lockstep
