// Preflight: fingerprint exchange and the difference table.
#include "preflight.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace lockstep {

std::string format_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j > i + 1 ? fmt::format("{}-{}", ranks[i], ranks[j])
                     : (j == i + 1 ? fmt::format("{},{}", ranks[i], ranks[j]) : std::to_string(ranks[i]));
    i = j + 1;
  }
  return out;
}

std::string compare_fingerprints(const std::vector<Fingerprint>& per_rank) {
  std::vector<std::string> keys;
  for (const auto& fp : per_rank)
    for (const auto& [k, v] : fp)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  struct Row {
    std::string field, ranks, value;
  };
  std::vector<Row> rows;
  for (const auto& k : keys) {
    // Distinct values in order of first appearance, with the ranks holding each.
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    for (size_t r = 0; r < per_rank.size(); ++r) {
      auto it = per_rank[r].find(k);
      const std::string v = it == per_rank[r].end() ? "(missing)" : it->second;
      auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == v; });
      if (g == groups.end())
        groups.push_back({v, {static_cast<int>(r)}});
      else
        g->second.push_back(static_cast<int>(r));
    }
    if (groups.size() < 2) continue;
    for (size_t i = 0; i < groups.size(); ++i)
      rows.push_back({i == 0 ? k : "", format_ranks(groups[i].second), groups[i].first});
  }
  if (rows.empty()) return "";
  size_t wf = 5, wr = 5;
  for (const auto& r : rows) {
    wf = std::max(wf, r.field.size());
    wr = std::max(wr, r.ranks.size());
  }
  std::string out = fmt::format("  {:<{}}  {:<{}}  {}\n", "field", wf, "ranks", wr, "value");
  for (const auto& r : rows) out += fmt::format("  {:<{}}  {:<{}}  {}\n", r.field, wf, r.ranks, wr, r.value);
  return out;
}

std::string preflight(Communicator& comm, const Fingerprint& mine) {
  const nlohmann::json j(mine);
  std::vector<Fingerprint> all;
  for (const std::string& s : allgather_strings(comm, j.dump()))
    all.push_back(nlohmann::json::parse(s).get<Fingerprint>());
  return compare_fingerprints(all);
}

}  // namespace lockstep
