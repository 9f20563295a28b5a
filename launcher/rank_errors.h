// How the errors of a job's ranks are reported: each error once, by rank 0,
// naming the ranks that hit it when not every rank did. Used where every rank
// has learnt every rank's outcome (after setup, and when every rank failed
// during training: launcher/trainer_main.cpp).
#pragma once

#include <string>
#include <vector>

namespace lockstep {

// One rank's outcome: code 0 is success (message empty), else the exit code
// and the one-line message.
struct RankOutcome {
  int code = 0;
  std::string message;
};

// The job's exit code: the largest of the ranks' codes (0 when all succeeded).
int job_exit_code(const std::vector<RankOutcome>& by_rank);

// The lines to print, one per distinct error, in order of the lowest rank that
// hit it. Messages that differ only in their figures (each run of digits) are
// one error, printed with its lowest rank's figures and saying so:
//   "<message>"                                 every rank, the same message
//   "[every rank, figures of rank 0] <message>" every rank, figures differ
//   "[rank 1,3 of 4] <message>"                 some ranks (", figures of rank 1")
// One process (by_rank.size() == 1) prints the message alone.
std::vector<std::string> rank_error_lines(const std::vector<RankOutcome>& by_rank);

}  // namespace lockstep
