// Atomic replace via temporary + fsync + rename + directory fsync.
#include "checkpoint/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace lockstep {

void write_file_atomically(const std::string& path, const std::function<void(std::FILE*)>& write) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  LS_CHECK_INPUT(fs::is_directory(dir), "{}: directory {} does not exist", path, dir.string());
  LS_CHECK_INPUT(!fs::is_directory(target), "{}: is a directory", path);
  std::string tmp_name = target.filename().string();
  tmp_name.insert(tmp_name.begin(), '.');  // hidden sibling of the target
  tmp_name.append(".tmp-XXXXXX");
  std::string tmp = (dir / tmp_name).string();
  const int fd = mkstemp(tmp.data());
  if (fd < 0) LS_INPUT_ERROR("{}: cannot create a temporary file in {} ({})", path, dir.string(), std::strerror(errno));
  std::FILE* f = fdopen(fd, "wb");
  if (!f) {
    ::close(fd);
    ::unlink(tmp.c_str());
    LS_THROW("{}: fdopen failed ({})", path, std::strerror(errno));
  }
  try {
    write(f);
    if (std::fflush(f) != 0 || ::fsync(fd) != 0) LS_INPUT_ERROR("{}: write failed ({})", path, std::strerror(errno));
    if (std::fclose(f) != 0) {
      f = nullptr;
      LS_INPUT_ERROR("{}: close failed ({})", path, std::strerror(errno));
    }
    f = nullptr;
    if (::rename(tmp.c_str(), path.c_str()) != 0) LS_INPUT_ERROR("{}: rename failed ({})", path, std::strerror(errno));
  } catch (...) {
    if (f) std::fclose(f);
    ::unlink(tmp.c_str());
    throw;
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace lockstep
