// Loggers: spdlog loggers created explicitly and passed around (no registry
// lookups). Info lines print bare (they are the training table); warnings and
// errors get a "warning: " / "error: " prefix; ranks other than 0 get "[rank r/N] ".
#pragma once

#include <spdlog/spdlog.h>

#include <memory>

namespace lockstep {

using Logger = std::shared_ptr<spdlog::logger>;

// Rank 0 logs at `level`; other ranks log warnings and errors only unless
// `all_ranks`. Writes to stdout (info) and stderr (warnings and errors).
Logger make_logger(int rank, int world_size, bool all_ranks, spdlog::level::level_enum level = spdlog::level::info);

}  // namespace lockstep
