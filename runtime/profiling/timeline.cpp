// Timeline: buffered Chrome trace events, written as a JSON array.
#include "profiling/timeline.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/input_subject.h"

namespace lockstep {

std::string timeline_path_for_rank(const std::string& path, int rank, int world_size) {
  if (world_size <= 1) return path;
  const std::filesystem::path p(path);
  std::string stem = p.stem().string(), ext = p.extension().string();
  if (ext.empty()) ext = ".json";
  return (p.parent_path() / (stem + ".rank" + std::to_string(rank) + ext)).string();
}

Timeline::Timeline(const std::string& path, int pid) : path_(path), pid_(pid), origin_(Clock::now()) {
  f_ = std::fopen(path.c_str(), "w");
  if (!f_) LS_INPUT_ERROR_ON(subject::kTimelineFile, ": cannot open {} ({})", path, std::strerror(errno));
  std::fputs("[\n", f_);
  const char* names[] = {"compute", "comm", "data"};
  std::string meta = nlohmann::json({{"name", "process_name"}, {"ph", "M"}, {"pid", pid_}, {"tid", 0},
                                     {"args", {{"name", "rank " + std::to_string(pid_)}}}})
                         .dump();
  for (int t = 0; t < 3; ++t)
    meta += ",\n" + nlohmann::json({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid_}, {"tid", t},
                                    {"args", {{"name", names[t]}}}})
                        .dump();
  std::fputs(meta.c_str(), f_);
  first_ = false;
}

Timeline::~Timeline() {
  flush();
  if (f_) {
    std::fputs("\n]\n", f_);
    std::fclose(f_);
  }
}

double Timeline::micros(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

void Timeline::span(const std::string& name, const char* category, int tid, Clock::time_point begin,
                    Clock::time_point end, const std::string& args) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back({name, args, category, tid, 'X', micros(begin), micros(end) - micros(begin)});
}

void Timeline::instant(const std::string& name, const char* category, int tid, Clock::time_point at,
                       const std::string& args) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back({name, args, category, tid, 'i', micros(at), 0});
}

void Timeline::flush() {
  std::vector<Event> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    events.swap(events_);
  }
  if (!f_) return;
  std::string out;
  for (const Event& e : events) {
    out += first_ ? "" : ",\n";
    first_ = false;
    nlohmann::json j = {{"name", e.name}, {"cat", e.category}, {"ph", std::string(1, e.phase)},
                        {"pid", pid_},    {"tid", e.tid},       {"ts", e.ts_us}};
    if (e.phase == 'X') j["dur"] = e.dur_us;
    if (e.phase == 'i') j["s"] = "t";
    if (!e.args.empty()) j["args"] = nlohmann::json::parse(e.args);
    out += j.dump();
  }
  std::fputs(out.c_str(), f_);
  std::fflush(f_);
}

}  // namespace lockstep
