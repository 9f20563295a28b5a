// bench_stats: the statistic the benchmark binaries report: the median of a
// run of timings (the upper one of the middle two for an even count; 0 for none).
#pragma once

#include <algorithm>
#include <vector>

namespace lockstep::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace lockstep::bench
