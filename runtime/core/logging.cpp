// Logger construction: one sink that writes info and below to stdout and
// warnings and errors to stderr, with a level-dependent prefix flag (%*).
#include "core/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>

#include <cstdio>
#include <cstring>
#include <mutex>

namespace lockstep {
namespace {

class LevelPrefix final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    const char* p = msg.level >= spdlog::level::err ? "error: " : msg.level == spdlog::level::warn ? "warning: " : "";
    dest.append(p, p + std::strlen(p));
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<LevelPrefix>(); }
};

class SplitConsoleSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    std::FILE* f = msg.level >= spdlog::level::warn ? stderr : stdout;
    std::fwrite(buf.data(), 1, buf.size(), f);
    std::fflush(f);
  }
  void flush_() override {
    std::fflush(stdout);
    std::fflush(stderr);
  }
};

}  // namespace

Logger make_logger(int rank, int world_size, bool all_ranks, spdlog::level::level_enum level) {
  auto logger = std::make_shared<spdlog::logger>("lockstep", std::make_shared<SplitConsoleSink>());
  const std::string rank_prefix =
      world_size > 1 && (rank != 0 || all_ranks) ? fmt::format("[rank {}/{}] ", rank, world_size) : std::string();
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<LevelPrefix>('*').set_pattern(rank_prefix + "%*%v");
  logger->set_formatter(std::move(formatter));
  logger->set_level(rank == 0 || all_ranks ? level : spdlog::level::warn);
  return logger;
}

}  // namespace lockstep
