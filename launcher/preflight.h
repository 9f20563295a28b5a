// Preflight check: before the first step every rank contributes a fingerprint
// (lockstep version and build, model and parameter signature, data set sizes,
// every setting that changes the training math); if any field differs, every
// rank learns which ranks differ in what, and the job ends with that table
// instead of hanging or silently training diverged replicas.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace lockstep {

using Fingerprint = std::map<std::string, std::string>;

// "" when every rank agrees; otherwise a table, one row per differing field:
//   field    ranks    value
std::string compare_fingerprints(const std::vector<Fingerprint>& per_rank);

// Collective: allgathers every rank's fingerprint and compares them.
std::string preflight(Communicator& comm, const Fingerprint& mine);

// "0,2-4": a compact list of ranks.
std::string format_ranks(const std::vector<int>& ranks);

}  // namespace lockstep
