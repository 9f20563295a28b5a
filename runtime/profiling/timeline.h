// Timeline: a Chrome trace (JSON array format; opens in Perfetto and
// chrome://tracing) of what one process did: forward and backward per layer,
// buckets becoming ready, allreduces, optimizer steps, data waits.
//
// Recording appends a small record to an in-memory buffer under a mutex
// (several threads record); nothing else is synchronised and no device is
// waited for. flush() writes the buffer out (the trainer does so at epoch
// ends), the destructor closes the array. Without a Timeline nothing is
// recorded at all.
#pragma once

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace lockstep {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;
  enum Thread : int { kCompute = 0, kComm = 1, kData = 2 };

  // Opens `path` for writing (InputError if it cannot); `pid` labels the
  // process (the rank).
  Timeline(const std::string& path, int pid);
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // A span [begin, end) on thread `tid`, with optional "args" as a JSON object text.
  void span(const std::string& name, const char* category, int tid, Clock::time_point begin, Clock::time_point end,
            const std::string& args = "");
  // A point in time.
  void instant(const std::string& name, const char* category, int tid, Clock::time_point at,
               const std::string& args = "");
  void flush();
  const std::string& path() const { return path_; }

 private:
  struct Event {
    std::string name, args;
    const char* category;
    int tid;
    char phase;  // 'X' span, 'i' instant
    double ts_us, dur_us;
  };
  double micros(Clock::time_point t) const;

  std::string path_;
  int pid_;
  std::FILE* f_ = nullptr;
  Clock::time_point origin_;
  std::mutex mu_;
  std::vector<Event> events_;
  bool first_ = true;
};

// "trace.json" for a world of one; "trace.rank3.json" for rank 3 of several.
std::string timeline_path_for_rank(const std::string& path, int rank, int world_size);

}  // namespace lockstep
