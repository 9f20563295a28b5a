// The "checkpoints" options: declared into the trainer's option groups and
// converted with messages that name the flag (option_values.h); and
// LOCKSTEP_RUN_ATTEMPT, the restart supervisor's record for a resumed attempt.
#include <cxxopts.hpp>

#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "job_control.h"
#include "option_values.h"
#include "options.h"

namespace lockstep {

void add_checkpoint_options(cxxopts::Options& o, const TrainConfig& d) {
  auto s = [](const std::string& v) { return cxxopts::value<std::string>()->default_value(v); };
  o.add_options("checkpoints")
      ("checkpoint-dir", "write checkpoints here (rank 0); created if missing", s(""))
      ("checkpoint-every", "also checkpoint every this many steps (0 = only at the end of each epoch)", s("0"))
      ("keep-checkpoints", "checkpoints kept in --checkpoint-dir", s(std::to_string(d.keep_checkpoints)))
      ("resume", "continue from the newest complete checkpoint in --checkpoint-dir (fresh start if none)",
       cxxopts::value<bool>()->default_value("false"))
      ("checkpoint-write", "background (rank 0 copies the state at the step and writes it on a thread of its own "
       "while training goes on; the next checkpoint, a stop and the end wait for it) or sync (written before the "
       "next step)", s(std::string(name(d.checkpoint_write))))
      ("checkpoint-failure", "when a checkpoint cannot be written (disk full, permissions): continue (warn, keep "
       "training with the checkpoints already on disk) or stop (every rank stops with an error at the next "
       "checkpoint or the end of training)", s(std::string(name(d.checkpoint_failure))));
}

void convert_checkpoint_options(const cxxopts::ParseResult& r, TrainConfig& c) {
  auto str = [&](const char* k) { return r[k].as<std::string>(); };
  c.checkpoint_dir = str("checkpoint-dir");
  c.checkpoint_every = to_int("checkpoint-every", str("checkpoint-every"));
  LS_CHECK_INPUT(c.checkpoint_every >= 0, "--checkpoint-every: {} must not be negative", c.checkpoint_every);
  const int64_t keep = to_int("keep-checkpoints", str("keep-checkpoints"));
  LS_CHECK_INPUT(keep > 0, "--keep-checkpoints: {} must be positive", keep);
  LS_CHECK_INPUT(keep <= std::numeric_limits<int>::max(), "--keep-checkpoints: {} is too large", keep);
  c.keep_checkpoints = static_cast<int>(keep);
  c.resume = r["resume"].as<bool>();
  c.checkpoint_write = parse_choice("checkpoint-write", str("checkpoint-write"),
                                    {CheckpointWrite::Background, CheckpointWrite::Sync});
  c.checkpoint_failure = parse_choice("checkpoint-failure", str("checkpoint-failure"),
                                      {CheckpointFailure::Continue, CheckpointFailure::Stop});
  // Recovery: lockstep-run's description of the failure a restarted attempt recovers from.
  if (const char* attempt = std::getenv(kRunAttemptVariable)) {
    const nlohmann::json j = nlohmann::json::parse(attempt, nullptr, false);
    LS_CHECK_INPUT(j.is_object() && j.contains("attempt") && j["attempt"].is_number_integer(),
                   "{}: '{}' is not lockstep-run's attempt record (a JSON object with \"attempt\")",
                   kRunAttemptVariable, std::string(attempt).substr(0, 80));
    c.restart_record = attempt;
  }
}

}  // namespace lockstep
