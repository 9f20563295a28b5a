// bench_args: the command-line checks the benchmark binaries share. A bad flag
// or value throws BadArgument, whose message is one line naming the flag and
// the value; each tool's main prints it as "TOOL: MESSAGE" on stderr and exits
// with kBadArguments. Parsing prints nothing and touches no MPI, so the MPI
// tools can parse on every rank and let rank 0 alone report.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace lockstep::bench {

constexpr int kBadArguments = 2;

struct BadArgument : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void bad_argument(fmt::format_string<Args...> f, Args&&... args) {
  throw BadArgument(fmt::format(f, std::forward<Args>(args)...));
}

// A finite number spelled by the whole of `text` (no leading blanks); `rest`,
// if given, takes what follows the number instead of requiring nothing to.
inline bool read_number(const std::string& text, double& out, std::string* rest = nullptr) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || errno == ERANGE || !std::isfinite(out)) return false;
  if (rest) *rest = end;
  return rest || *end == '\0';
}

// An integer in [lo, hi]: "FLAG must be an integer from LO to HI, got 'TEXT'".
inline int64_t int_argument(const std::string& flag, const std::string& text, int64_t lo, int64_t hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = text.empty() || std::isspace(static_cast<unsigned char>(text[0]))
                          ? 0
                          : std::strtoll(text.c_str(), &end, 10);
  if (end == nullptr || end == text.c_str() || *end != '\0' || errno == ERANGE || v < lo || v > hi)
    bad_argument("{} must be an integer from {} to {}, got '{}'", flag, lo, hi, text);
  return v;
}

// A finite number that `ok` accepts: "FLAG must be WHAT, got 'TEXT'".
template <typename Ok>
double number_argument(const std::string& flag, const std::string& text, Ok ok, const char* what) {
  double v = 0;
  if (!read_number(text, v) || !ok(v)) bad_argument("{} must be {}, got '{}'", flag, what, text);
  return v;
}

// A byte count: a number with an optional K, M or G (binary units), from 1
// byte to `hi` bytes.
inline int64_t size_argument(const std::string& flag, const std::string& text, int64_t hi, const char* hi_text) {
  double v = 0;
  std::string unit;
  bool ok = read_number(text, v, &unit);
  if (unit == "K" || unit == "k") v *= 1024;
  else if (unit == "M" || unit == "m") v *= 1024.0 * 1024;
  else if (unit == "G" || unit == "g") v *= 1024.0 * 1024 * 1024;
  else if (!unit.empty()) ok = false;
  if (!ok || !(v >= 1) || v > static_cast<double>(hi))
    bad_argument("{} must be a size from 1 byte to {} (a number, optionally with K, M or G), got '{}'", flag, hi_text,
                 text);
  return static_cast<int64_t>(v);
}

// "FLAG must be one of A, B, C, got 'TEXT'" unless TEXT is one of `names`.
inline std::string one_of(const std::string& flag, const std::string& text, const std::vector<std::string>& names) {
  for (const auto& n : names)
    if (n == text) return text;
  bad_argument("{} must be one of {}, got '{}'", flag, fmt::join(names, ", "), text);
}

// "-k value" / "--key value" pairs, each key one of `keys` (a later pair
// overrides an earlier one), and -h / --help. Anything else, or a key
// without its value, is a BadArgument.
struct KeyValues {
  std::map<std::string, std::string> values;
  bool help = false;
  bool has(const std::string& key) const { return values.count(key) > 0; }
  const std::string& at(const std::string& key) const { return values.at(key); }
};

inline KeyValues key_values(int argc, char** argv, const std::vector<std::string>& keys) {
  KeyValues kv;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "-h" || k == "--help") {
      kv.help = true;
    } else if (std::find(keys.begin(), keys.end(), k) != keys.end()) {
      if (i + 1 >= argc) bad_argument("{} needs a value", k);
      kv.values[k] = argv[++i];
    } else if (!k.empty() && k[0] == '-') {
      bad_argument("unknown option '{}' (see --help)", k);
    } else {
      bad_argument("unexpected argument '{}' (see --help)", k);
    }
  }
  return kv;
}

// cxxopts quotes with typographic marks; error lines use plain ones.
inline std::string plain_quotes(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const bool quote = s.compare(i, 3, "\u2018") == 0 || s.compare(i, 3, "\u2019") == 0;  // 3 bytes in UTF-8
    out += quote ? '\'' : s[i];
    i += quote ? 3 : 1;
  }
  return out;
}

// No arguments but -h / --help (true if given): BadArgument for any other.
inline bool no_arguments(int argc, char** argv) { return key_values(argc, argv, {}).help; }

// The MPI tools' argument handling. Every rank parses the same arguments
// before MPI starts (parse_arguments: the error text, empty if none), so every
// rank sees the same error; once MPI is up, stop_early has rank 0 print the
// error or the usage and tells every rank to leave, before any collective,
// with the exit code it returns (-1: go on).
template <typename Config, typename Parse>
std::string parse_arguments(Parse&& parse, int argc, char** argv, Config& cfg) {
  try {
    cfg = parse(argc, argv);
  } catch (const BadArgument& e) {
    return e.what();
  }
  return "";
}

inline int stop_early(int rank, const char* tool, const std::string& bad, bool help, const char* usage) {
  if (bad.empty() && !help) return -1;
  if (rank == 0 && !bad.empty()) std::fprintf(stderr, "%s: %s\n", tool, bad.c_str());
  if (rank == 0 && bad.empty()) std::fputs(usage, stdout);
  return bad.empty() ? 0 : kBadArguments;
}

}  // namespace lockstep::bench
