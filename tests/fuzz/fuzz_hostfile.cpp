// Fuzz target for lockstep-run's host lists (launcher/hosts.h): each input is
// parsed as a hostfile (written to a file) and, as a string, as an -H list.
// Whatever parses must describe hosts mpirun can take: valid names, 1 to 4096
// slots, no duplicates, and -H lists that format_host_list turns back into
// the same hosts.
#include <set>

#include "core/error.h"
#include "fuzz_util.h"
#include "hosts.h"

using namespace lockstep;

namespace {

void check_hosts(const std::vector<Host>& hosts) {
  if (hosts.empty()) fuzz::fail("a host list parsed to no hosts");
  std::set<std::string> names;
  for (const Host& h : hosts) {
    if (h.name.empty() || h.slots < 1 || h.slots > 4096) fuzz::fail("a parsed host has no name or a bad slot count");
    if (!names.insert(h.name).second) fuzz::fail("a parsed host list names a host twice");
    if (h.name.find_first_of(" \t\r\n#,=") != std::string::npos) fuzz::fail("a parsed host name has a separator in it");
  }
  if (total_slots(hosts) < static_cast<int>(hosts.size())) fuzz::fail("total_slots is less than the host count");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::scratch().file("hostfile");
  fuzz::write_file(path, data, size);
  try {
    check_hosts(parse_hostfile(path));
  } catch (const InputError&) {
  }
  std::vector<Host> hosts;
  try {
    hosts = parse_host_list(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const InputError&) {
    return 0;
  }
  check_hosts(hosts);
  std::vector<Host> again;
  try {
    again = parse_host_list(format_host_list(hosts));
  } catch (const InputError&) {
    fuzz::fail("format_host_list of a parsed -H list does not parse");
  }
  if (again.size() != hosts.size()) fuzz::fail("format_host_list does not round-trip");
  for (size_t i = 0; i < hosts.size(); ++i)
    if (again[i].name != hosts[i].name || again[i].slots != hosts[i].slots)
      fuzz::fail("format_host_list does not round-trip");
  return 0;
}
