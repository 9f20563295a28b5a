// Progress bar drawing with \r and an ANSI erase-line.
#include "progress.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace lockstep {

std::string group_thousands(double value) {
  const auto v = static_cast<long long>(std::llround(value));
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

void ProgressBar::start(const std::string& label, int64_t total_steps) {
  label_ = label;
  total_ = total_steps;
  start_ = std::chrono::steady_clock::now();
  last_draw_ = {};
}

void ProgressBar::update(int64_t step, double loss, double images_per_sec, bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 24;
  const double frac = total_ > 0 ? static_cast<double>(step) / static_cast<double>(total_) : 1.0;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double eta = step > 0 ? elapsed / static_cast<double>(step) * static_cast<double>(total_ - step) : 0.0;
  const std::string line = fmt::format("\r\033[2K{} {:>{}}/{} [{}] loss {:.3f} | {} img/s | ETA {:.0f}s", label_, step,
                                       std::to_string(total_).size(), total_, bar, loss,
                                       group_thousands(images_per_sec), eta);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
  drawn_ = true;
}

void ProgressBar::clear() {
  if (!drawn_) return;
  std::fputs("\r\033[2K", stdout);
  std::fflush(stdout);
  drawn_ = false;
}

bool under_job_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "SLURM_JOB_ID"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

}  // namespace lockstep
