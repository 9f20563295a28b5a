// Metrics file: JSON Lines, one object per line, flushed as written so a
// running job can be followed. Opened only after every input was validated.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace lockstep {

class MetricsWriter {
 public:
  MetricsWriter() = default;  // disabled
  explicit MetricsWriter(const std::string& path);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(const nlohmann::json& record);

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
};

}  // namespace lockstep
