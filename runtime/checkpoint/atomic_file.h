// Crash-safe file replacement: write to a temporary file in the same directory,
// fsync it, rename over the target, fsync the directory. A crash at any point
// leaves either the old file or the new one, never a torn one; on error the
// temporary is removed and the target is untouched.
#pragma once

#include <functional>
#include <string>

namespace lockstep {

// `write` receives an open FILE* to the temporary file.
void write_file_atomically(const std::string& path, const std::function<void(std::FILE*)>& write);

}  // namespace lockstep
