// The build identity of this executable: a hash of its own bytes
// (/proc/self/exe), so two hosts run "the same build" exactly when they run
// byte-identical binaries. Used by --version, lockstep-run --check and the
// preflight fingerprint.
#pragma once

#include <string>

namespace lockstep {

// "0.1.0 build 1a2b3c4d5e6f7a8b"
std::string build_id();

}  // namespace lockstep
