// IDX parsing through zlib's gz* interface (transparent for uncompressed files).
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/error.h"

namespace lockstep {
namespace {

// Largest array we accept (elements): well above any MNIST-style data set,
// small enough that a corrupt header cannot ask for an absurd allocation.
constexpr int64_t kMaxElements = int64_t{1} << 33;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Reads exactly n bytes or explains why not. For a part read in pieces, the
// message counts from its start: `before` bytes of it were read already, and
// it is `whole` bytes long.
void read_exact(gzFile f, const std::string& path, void* dst, size_t n, const char* what, size_t before = 0,
                size_t whole = 0) {
  size_t done = 0;
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
    const int got = gzread(f, static_cast<char*>(dst) + done, chunk);
    if (got < 0) {
      int err = 0;
      const char* msg = gzerror(f, &err);
      LS_INPUT_ERROR("{}: corrupt compressed data while reading the {} ({})", path, what, msg ? msg : "zlib error");
    }
    if (got == 0) {
      int err = 0;
      const char* msg = gzerror(f, &err);
      if (err != Z_OK && err != Z_BUF_ERROR)
        LS_INPUT_ERROR("{}: corrupt compressed data while reading the {} ({})", path, what, msg);
      LS_INPUT_ERROR("{}: file is truncated: the {} needs {} bytes, only {} present", path, what,
                     whole ? whole : n, before + done);
    }
    done += static_cast<size_t>(got);
  }
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  LS_CHECK_INPUT(std::filesystem::exists(st), "{}: no such file", path);
  LS_CHECK_INPUT(std::filesystem::is_regular_file(st), "{}: not a regular file", path);
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) LS_INPUT_ERROR("{}: cannot open ({})", path, std::strerror(errno ? errno : ENOENT));
  uint8_t magic[4];
  read_exact(f.get(), path, magic, 4, "header");
  LS_CHECK_INPUT(magic[0] == 0 && magic[1] == 0, "{}: not an IDX file (magic bytes {:02x} {:02x}, expected 00 00)", path,
                 magic[0], magic[1]);
  LS_CHECK_INPUT(magic[2] == 0x08, "{}: IDX element type 0x{:02x} is not supported (only unsigned bytes, 0x08)", path,
                 magic[2]);
  const int ndims = magic[3];
  LS_CHECK_INPUT(ndims >= 1 && ndims <= 4, "{}: IDX file has {} dimensions (expected 1 to 4)", path, ndims);
  IdxArray a;
  int64_t total = 1;
  for (int d = 0; d < ndims; ++d) {
    uint8_t b[4];
    read_exact(f.get(), path, b, 4, "dimension sizes");
    const int64_t n = (int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | b[3];
    LS_CHECK_INPUT(n > 0, "{}: dimension {} has size 0", path, d);
    LS_CHECK_INPUT(n <= kMaxElements / total, "{}: dimensions describe more than {} elements", path, kMaxElements);
    total *= n;
    a.dims.push_back(n);
  }
  // Grown as the data arrives, so a header that claims gigabytes costs memory
  // only for the bytes actually there (gzip does not say its size up front).
  size_t have = 0;
  while (have < static_cast<size_t>(total)) {
    const size_t chunk = std::min<size_t>(static_cast<size_t>(total) - have, std::max<size_t>(have, size_t{1} << 20));
    a.data.resize(have + chunk);
    read_exact(f.get(), path, a.data.data() + have, chunk, "data", have, static_cast<size_t>(total));
    have += chunk;
  }
  char extra;
  const int more = gzread(f.get(), &extra, 1);
  LS_CHECK_INPUT(more == 0, "{}: unexpected bytes after the {} elements the header describes", path, total);
  return a;
}

void write_idx(const std::string& path, const std::vector<int64_t>& dims, const std::vector<uint8_t>& data, bool gzip) {
  std::vector<uint8_t> bytes{0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (int64_t d : dims)
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<uint8_t>((d >> s) & 0xff));
  bytes.insert(bytes.end(), data.begin(), data.end());
  GzFile f(gzopen(path.c_str(), gzip ? "wb" : "wbT"));
  LS_CHECK(f != nullptr, "{}: cannot create", path);
  LS_CHECK(gzwrite(f.get(), bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()),
           "{}: write failed", path);
}

}  // namespace lockstep
