// Reporting the ranks' errors once each (see rank_errors.h).
#include "rank_errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "preflight.h"

namespace lockstep {

namespace {

// The message with each run of digits replaced by one '#'.
std::string without_figures(const std::string& msg) {
  std::string out;
  for (char c : msg)
    if (!std::isdigit(static_cast<unsigned char>(c)))
      out += c;
    else if (out.empty() || out.back() != '#')
      out += '#';
  return out;
}

}  // namespace

int job_exit_code(const std::vector<RankOutcome>& by_rank) {
  int code = 0;
  for (const RankOutcome& o : by_rank) code = std::max(code, o.code);
  return code;
}

std::vector<std::string> rank_error_lines(const std::vector<RankOutcome>& by_rank) {
  struct Error {
    std::string key, message;  // message: the lowest rank's
    std::vector<int> ranks;
    bool same_figures = true;
  };
  std::vector<Error> errors;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    const RankOutcome& o = by_rank[r];
    if (o.code == 0) continue;
    const std::string key = without_figures(o.message);
    auto it = std::find_if(errors.begin(), errors.end(), [&](const Error& e) { return e.key == key; });
    if (it == errors.end()) {
      errors.push_back({key, o.message, {static_cast<int>(r)}, true});
    } else {
      it->ranks.push_back(static_cast<int>(r));
      it->same_figures = it->same_figures && it->message == o.message;
    }
  }
  const size_t world = by_rank.size();
  std::vector<std::string> lines;
  for (const Error& e : errors) {
    const std::string figures = e.same_figures ? "" : fmt::format(", figures of rank {}", e.ranks.front());
    if (world == 1 || (e.ranks.size() == world && e.same_figures))
      lines.push_back(e.message);
    else if (e.ranks.size() == world)
      lines.push_back(fmt::format("[every rank{}] {}", figures, e.message));
    else
      lines.push_back(fmt::format("[rank {} of {}{}] {}", format_ranks(e.ranks), world, figures, e.message));
  }
  return lines;
}

}  // namespace lockstep
