// build_id: FNV-1a over the running executable.
#include "build_id.h"

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <vector>

#include "core/hash.h"

namespace lockstep {

std::string build_id() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const uint64_t h = fnv1a(std::string_view(bytes.data(), bytes.size()));
  return fmt::format("{} build {:016x}", LOCKSTEP_VERSION, h);
}

}  // namespace lockstep
