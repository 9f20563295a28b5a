// Fuzz target for the IDX reader (runtime/data/idx.h). Each input is written
// as a file and read; when it is not already gzip, its gzip-compressed form is
// read too, and the two results must agree (same array, or both InputErrors):
// zlib's transparent mode must not change what the reader accepts.
#include <zlib.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "core/error.h"
#include "data/idx.h"
#include "fuzz_util.h"

using namespace lockstep;

namespace {

std::optional<IdxArray> read_or_input_error(const std::string& path) {
  try {
    IdxArray a = read_idx(path);
    int64_t total = 1;
    for (int64_t d : a.dims) {
      if (d <= 0) fuzz::fail("read_idx returned a non-positive dimension");
      total *= d;
    }
    if (a.dims.empty() || a.dims.size() > 4 || static_cast<int64_t>(a.data.size()) != total)
      fuzz::fail("read_idx returned data that does not match its dimensions");
    return a;
  } catch (const InputError&) {
    return std::nullopt;
  }
}

std::vector<uint8_t> gzip(const uint8_t* data, size_t size) {
  z_stream z{};
  if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) fuzz::fail("deflateInit2");
  std::vector<uint8_t> out(deflateBound(&z, size) + 32);
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = static_cast<uInt>(size);
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) fuzz::fail("deflate");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string plain = fuzz::scratch().file("input.idx");
  fuzz::write_file(plain, data, size);
  const auto a = read_or_input_error(plain);
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) return 0;  // already gzip
  const std::vector<uint8_t> z = gzip(data, size);
  const std::string packed = fuzz::scratch().file("input.idx.gz");
  fuzz::write_file(packed, z.data(), z.size());
  const auto b = read_or_input_error(packed);
  if (a.has_value() != b.has_value()) fuzz::fail("plain and gzip forms of the input: one reads, the other is an InputError");
  if (a && (a->dims != b->dims || a->data != b->data)) fuzz::fail("plain and gzip forms of the input read differently");
  return 0;
}
