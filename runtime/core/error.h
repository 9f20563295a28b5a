// Errors inside the runtime: one exception type carrying the failing source
// location and a readable message. Only launcher/ turns these into a logged line
// and a process exit; the runtime never exits or aborts on its own.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "core/throw.h"

namespace lockstep {

class Error : public std::runtime_error {
 public:
  Error(const char* file, int line, const std::string& message);
  const std::string& message() const { return message_; }  // without location
  const char* file() const { return file_; }
  int line() const { return line_; }

 private:
  std::string message_;
  const char* file_;
  int line_;
};

// Error raised for bad user input (flags, files, environment). The launcher
// prints these without the source location: the message names the input.
//
// subject(): the input in the runtime's own words ("data directory", "SGD
// momentum"), with which message() begins; empty when the message names its
// input another way. The runtime knows concepts, not how a program let its
// user set them: the trainer puts the flag or variable in the subject's place
// (launcher/input_names.h), a program linking the library may do the same.
class InputError : public Error {
 public:
  InputError(const char* file, int line, const std::string& message, std::string subject = {});
  const std::string& subject() const { return subject_; }
  std::string detail() const { return message().substr(subject_.size()); }  // message() after the subject

 private:
  std::string subject_;
};

// Memory ran out (host or GPU) for an allocation. Usually the batch is too
// large for the machine: the launcher says which options set it.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};


}  // namespace lockstep

#define LS_THROW(...) ::lockstep::throw_error(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__))
#define LS_INPUT_ERROR(...) ::lockstep::throw_input_error(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__))
// "<subject><detail>": an input error about `subject` (see InputError).
#define LS_INPUT_ERROR_ON(subject, ...) \
  ::lockstep::throw_input_error_on(__FILE__, __LINE__, subject, ::fmt::format(__VA_ARGS__))
#define LS_CHECK(cond, ...)                                                              \
  do {                                                                                   \
    if (!(cond)) ::lockstep::throw_error(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__)); \
  } while (0)
#define LS_CHECK_INPUT(cond, ...)                                                              \
  do {                                                                                         \
    if (!(cond)) ::lockstep::throw_input_error(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__)); \
  } while (0)
#define LS_CHECK_INPUT_ON(cond, subject, ...)                                                             \
  do {                                                                                                    \
    if (!(cond)) ::lockstep::throw_input_error_on(__FILE__, __LINE__, subject, ::fmt::format(__VA_ARGS__)); \
  } while (0)
