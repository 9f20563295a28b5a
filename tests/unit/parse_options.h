// The trainer's option parsing as the unit tests drive it: arguments after
// "trainer" (the environment as it is), the parsed config, or the one input
// error they give.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/error.h"
#include "options.h"

namespace lockstep::testing {

inline ParseOutcome parse_into(std::vector<std::string> args, TrainConfig& c) {
  args.insert(args.begin(), "trainer");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_train_options(static_cast<int>(argv.size()), argv.data(), c);
}

inline TrainConfig parse(std::vector<std::string> args) {
  TrainConfig c;
  REQUIRE(parse_into(std::move(args), c) == ParseOutcome::Run);
  return c;
}

// The message of the InputError the arguments give; fails the test if none.
inline std::string parse_error(std::vector<std::string> args) {
  TrainConfig c;
  try {
    parse_into(std::move(args), c);
  } catch (const InputError& e) {
    return e.message();
  }
  FAIL("no error");
  return "";
}

}  // namespace lockstep::testing
