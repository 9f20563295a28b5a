// CollectiveTracker: where this rank is in the job's sequence of collectives,
// readable from another thread (the watchdog) without locks.
//
// Every collective that can wait on another rank (a gradient bucket, the
// shared-memory handoff, metric reductions, the per-step agreement) is
// bracketed by a CollectiveScope. Ranks make the same collectives in the same
// order, so the sequence number `seq` (collectives entered so far) says the
// same thing on every rank: a rank whose seq is behind the others has not
// reached the collective they wait in. The training loop sets the step.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace lockstep {

enum class CollectiveKind : int32_t {
  None = 0,
  Bucket,           // detail: bucket index
  GradientHandoff,  // shared memory: waiting for the other ranks to finish reading this rank's gradients
  StateBroadcast,
  Metrics,
  Evaluation,
  StepAgreement,    // the per-step reduction of stop requests (preemption)
  ReplicaCheck,     // min/max reduction of the parameter checksums (--check-replicas-every)
  BatchNormSync,    // batch statistics summed over ranks (--sync-batchnorm), forward or backward
  BufferSync,       // buffers (batch norm running statistics) averaged before evaluation and saving
  Checkpoint,       // not a collective (no seq): rank 0 writing a checkpoint, so reports can say so
  ParameterGather,  // ZeRO-1: every rank's updated parameters to every rank, after the update
  GradientNorm,     // ZeRO-1 with clipping: the ranks' partial sums of squares
  StateGather,      // ZeRO-1: the sharded optimizer state assembled for a checkpoint
};
inline bool is_collective(CollectiveKind k) { return k != CollectiveKind::None && k != CollectiveKind::Checkpoint; }

// "allreduce bucket 7", "metrics reduction", ...
std::string describe_collective(CollectiveKind kind, int32_t detail);

struct CollectivePosition {
  uint64_t seq = 0;  // collectives entered so far (the current one included)
  int64_t step = 0;  // training step (0-based) the rank is working on
  CollectiveKind kind = CollectiveKind::None;
  int32_t detail = 0;
  bool inside = false;       // in that collective now
  int64_t since_ns = 0;      // steady-clock time it entered (or left) it
};

class CollectiveTracker {
 public:
  using Clock = std::chrono::steady_clock;
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  }

  void set_step(int64_t step) { step_.store(step, std::memory_order_relaxed); }
  void enter(CollectiveKind kind, int32_t detail) {
    kind_.store(static_cast<int32_t>(kind), std::memory_order_relaxed);
    detail_.store(detail, std::memory_order_relaxed);
    since_ns_.store(now_ns(), std::memory_order_relaxed);
    if (is_collective(kind)) seq_.fetch_add(1, std::memory_order_relaxed);
    inside_.store(true, std::memory_order_release);
  }
  void leave() {
    since_ns_.store(now_ns(), std::memory_order_relaxed);
    inside_.store(false, std::memory_order_release);
  }
  // A consistent-enough snapshot (fields may be a moment apart; it is for diagnosis).
  CollectivePosition position() const {
    CollectivePosition p;
    p.inside = inside_.load(std::memory_order_acquire);
    p.seq = seq_.load(std::memory_order_relaxed);
    p.step = step_.load(std::memory_order_relaxed);
    p.kind = static_cast<CollectiveKind>(kind_.load(std::memory_order_relaxed));
    p.detail = detail_.load(std::memory_order_relaxed);
    p.since_ns = since_ns_.load(std::memory_order_relaxed);
    return p;
  }

 private:
  std::atomic<uint64_t> seq_{0};
  std::atomic<int64_t> step_{0};
  std::atomic<int32_t> kind_{0}, detail_{0};
  std::atomic<bool> inside_{false};
  std::atomic<int64_t> since_ns_{0};
};

// Brackets one collective; a null tracker does nothing.
class CollectiveScope {
 public:
  CollectiveScope(CollectiveTracker* t, CollectiveKind kind, int32_t detail = 0) : t_(t) {
    if (t_) t_->enter(kind, detail);
  }
  ~CollectiveScope() {
    if (t_) t_->leave();
  }
  CollectiveScope(const CollectiveScope&) = delete;
  CollectiveScope& operator=(const CollectiveScope&) = delete;

 private:
  CollectiveTracker* t_;
};

}  // namespace lockstep
