// MetricsWriter.
#include "metrics.h"

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace lockstep {

MetricsWriter::MetricsWriter(const std::string& path) : path_(path) {
  f_ = std::fopen(path.c_str(), "w");
  if (!f_) LS_INPUT_ERROR("--metrics-file: cannot open {} ({})", path, std::strerror(errno));
}

MetricsWriter::~MetricsWriter() {
  if (f_) std::fclose(f_);
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (!f_) return;
  const std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
    LS_INPUT_ERROR("--metrics-file: write to {} failed ({})", path_, std::strerror(errno));
}

}  // namespace lockstep
