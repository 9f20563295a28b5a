// Hostfile and -H parsing with line-numbered errors.
#include "hosts.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace lockstep {
namespace {

// Bytes outside printable ASCII as \xNN: a garbage line still gives one readable message line.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s)
    out += (c >= 0x20 && c < 0x7f) ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
  return out;
}

int parse_count(const std::string& text, const std::string& where, const char* what) {
  int v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  LS_CHECK_INPUT(ec == std::errc() && p == text.data() + text.size() && v > 0 && v <= 4096,
                 "{}: {} '{}' is not a whole number from 1 to 4096", where, what, printable(text));
  return v;
}

bool valid_hostname(const std::string& h) {
  if (h.empty() || h.size() > 253) return false;
  for (char c : h)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' || c == ':'))
      return false;
  return true;
}

void add(std::vector<Host>& hosts, Host h) {
  for (const Host& o : hosts)
    LS_CHECK_INPUT(o.name != h.name, "{}: host '{}' is already listed ({})", h.origin, h.name, o.origin);
  hosts.push_back(std::move(h));
}

}  // namespace

std::vector<Host> parse_hostfile(const std::string& path) {
  std::error_code ec;
  LS_CHECK_INPUT(std::filesystem::is_regular_file(path, ec), "--hostfile: {} is not a file", path);
  std::ifstream in(path);
  LS_CHECK_INPUT(in.good(), "--hostfile: cannot read {} ({})", path, std::strerror(errno));
  std::vector<Host> hosts;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    const std::string where = fmt::format("{}:{}", path, lineno);
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string name, word;
    if (!(words >> name)) continue;  // blank or comment
    LS_CHECK_INPUT(valid_hostname(name), "{}: '{}' is not a host name", where, printable(name));
    Host h{name, 1, "hostfile " + where};
    bool slots_seen = false;
    while (words >> word) {
      const size_t eq = word.find('=');
      LS_CHECK_INPUT(eq != std::string::npos, "{}: '{}' is not of the form key=value (expected slots=N)", where,
                     printable(word));
      const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
      if (key == "slots") {
        LS_CHECK_INPUT(!slots_seen, "{}: slots given twice", where);
        h.slots = parse_count(value, where, "slots");
        slots_seen = true;
      } else if (key == "max_slots" || key == "max-slots") {
        parse_count(value, where, "max_slots");  // accepted as Open MPI does; slots decide the mapping
      } else {
        LS_INPUT_ERROR("{}: unknown key '{}' (expected slots=N or max_slots=N)", where, printable(key));
      }
    }
    add(hosts, std::move(h));
  }
  LS_CHECK_INPUT(!hosts.empty(), "--hostfile: {} lists no hosts", path);
  return hosts;
}

std::vector<Host> parse_host_list(const std::string& list) {
  std::vector<Host> hosts;
  size_t start = 0;
  for (int index = 1; start <= list.size(); ++index) {
    const size_t comma = list.find(',', start);
    const std::string entry = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::string where = fmt::format("-H entry {} ('{}')", index, entry);
    const size_t colon = entry.rfind(':');
    Host h{entry, 1, where};
    if (colon != std::string::npos) {
      h.name = entry.substr(0, colon);
      h.slots = parse_count(entry.substr(colon + 1), where, "slot count");
    }
    LS_CHECK_INPUT(valid_hostname(h.name) && h.name.find(':') == std::string::npos, "{}: '{}' is not a host name",
                   where, h.name);
    add(hosts, std::move(h));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return hosts;
}

int total_slots(const std::vector<Host>& hosts) {
  int n = 0;
  for (const Host& h : hosts) n += h.slots;
  return n;
}

std::string format_host_list(const std::vector<Host>& hosts) {
  std::string s;
  for (const Host& h : hosts) s += (s.empty() ? "" : ",") + h.name + ":" + std::to_string(h.slots);
  return s;
}

}  // namespace lockstep
