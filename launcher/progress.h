// A one-line progress bar for the current epoch (step, loss, img/s, ETA),
// redrawn at most ten times a second. Only used when stdout is a terminal
// (or --progress on); otherwise every call is a no-op and logs stay plain.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace lockstep {

class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled) {}
  void start(const std::string& label, int64_t total_steps);
  void update(int64_t step, double loss, double images_per_sec, bool force = false);
  void clear();  // erase the bar before a regular line is printed

 private:
  bool enabled_;
  bool drawn_ = false;
  std::string label_;
  int64_t total_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// "6445" -> "6,445"
std::string group_thousands(double value);

// True when a job launcher (mpirun, srun, any PMI/PMIx launcher) started this
// process. Their output goes to logs even when it looks like a terminal, so
// --progress auto stays off.
bool under_job_launcher();

}  // namespace lockstep
