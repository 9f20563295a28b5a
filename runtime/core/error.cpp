// Error construction: "<message> (<file>:<line>)" with the path trimmed to the
// part below the repository root so messages stay short.
#include "core/error.h"

#include <cstring>

namespace lockstep {
namespace {
const char* short_path(const char* file) {
  for (const char* root : {"/runtime/", "/models/", "/launcher/", "/tests/", "/scripts/"}) {
    if (const char* p = std::strstr(file, root)) return p + 1;
  }
  return file;
}
}  // namespace

Error::Error(const char* file, int line, const std::string& message)
    : std::runtime_error(message + " (" + short_path(file) + ":" + std::to_string(line) + ")"),
      message_(message),
      file_(short_path(file)),
      line_(line) {}

void throw_error(const char* file, int line, const std::string& message) {
  throw Error(file, line, message);
}
void throw_input_error(const char* file, int line, const std::string& message) {
  throw InputError(file, line, message);
}

}  // namespace lockstep
