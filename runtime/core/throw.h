// Throwing lockstep::Error without fmt: for code nvcc compiles (.cu files),
// which cannot include core/error.h (nvcc 13 rejects fmt 9's compile-time
// format strings). Messages are built with std::string; core/error.h
// includes this header, so there is one declaration of each function.
#pragma once

#include <string>

namespace lockstep {

[[noreturn]] void throw_error(const char* file, int line, const std::string& message);
[[noreturn]] void throw_input_error(const char* file, int line, const std::string& message);
// InputError with message subject + detail and that subject.
[[noreturn]] void throw_input_error_on(const char* file, int line, const std::string& subject,
                                       const std::string& detail);

}  // namespace lockstep

// Throws lockstep::Error with file:line unless `cond` holds; `message` is a std::string expression.
#define LS_REQUIRE(cond, message)                                                     \
  do {                                                                                \
    if (!(cond)) ::lockstep::throw_error(__FILE__, __LINE__, std::string(message));   \
  } while (0)
