// Error construction: "<message> (<file>:<line>)" with the path trimmed to the
// part below the repository root so messages stay short.
#include "core/error.h"

#include <cstring>
#include <utility>

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

InputError::InputError(const char* file, int line, const std::string& message, std::string subject)
    : Error(file, line, message), subject_(std::move(subject)) {}

void throw_error(const char* file, int line, const std::string& message) {
  throw Error(file, line, message);
}
void throw_input_error(const char* file, int line, const std::string& message) {
  throw InputError(file, line, message);
}
void throw_input_error_on(const char* file, int line, const std::string& subject, const std::string& detail) {
  throw InputError(file, line, subject + detail, subject);
}

}  // namespace lockstep
