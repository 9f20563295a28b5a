// build_id: FNV-1a over the running executable.
#include "build_id.h"

#include <fmt/format.h>

#include <fstream>
#include <vector>

#include "core/hash.h"

namespace lockstep {

std::string build_id() {
  // In 1 MB blocks, not through istreambuf_iterator: that costs a call per
  // byte, seconds per process start for an 81 MB sanitizer build.
  std::ifstream in("/proc/self/exe", std::ios::binary);
  std::vector<char> block(size_t{1} << 20);
  uint64_t h = fnv1a(std::string_view());
  while (in.read(block.data(), static_cast<std::streamsize>(block.size())) || in.gcount() > 0)
    h = fnv1a(std::string_view(block.data(), static_cast<size_t>(in.gcount())), h);
  return fmt::format("{} build {:016x}", LOCKSTEP_VERSION, h);
}

}  // namespace lockstep
