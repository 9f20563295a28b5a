// The runtime names the inputs of its input errors in its own words
// (InputError::subject, core/input_subject.h); the trainer's users set them as
// flags and LOCKSTEP_* variables. This is the one table between the two.
#pragma once

#include <string>

#include "core/error.h"
#include "options.h"

namespace lockstep {

// The flag the trainer sets `subject` with ("--data-dir"), or "" when it has none.
std::string flag_for_subject(const std::string& subject);

// The message a trainer user reads for `e`: its subject replaced by the flag,
// and "(set by LOCKSTEP_X)" when that variable, not the command line, set it.
// Messages without a known subject stay as they are.
std::string user_message(const InputError& e, const TrainConfig& config);

}  // namespace lockstep
