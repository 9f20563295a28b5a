// CRC-32 (zlib) of tensors and metadata, stored and verified as metadata strings.
#include "checkpoint/checksums.h"

#include <zlib.h>

#include <algorithm>

namespace lockstep {
namespace {

constexpr const char* kTensorKey = "tensor_crc32";
constexpr const char* kMetadataKey = "metadata_crc32";

uint32_t crc32_of(const void* data, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(data);
  while (n > 0) {  // zlib takes uInt lengths
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

// The metadata's own checksum covers every other key and value, in key order.
uint32_t metadata_crc(const std::map<std::string, std::string>& meta) {
  std::string all;
  for (const auto& [k, v] : meta) {
    if (k == kMetadataKey) continue;
    all += k;
    all += '\0';
    all += v;
    all += '\0';
  }
  return crc32_of(all.data(), all.size());
}

std::string hex32(uint32_t v) { return fmt::format("{:08x}", v); }

}  // namespace

void add_checksums(const std::vector<SafetensorsEntry>& entries, std::map<std::string, std::string>& meta) {
  std::string sums;
  for (const SafetensorsEntry& e : entries) {
    LS_CHECK(e.name.find_first_of("=;") == std::string::npos, "tensor name '{}' has '=' or ';'", e.name);
    sums += (sums.empty() ? "" : ";") + e.name + "=" + hex32(crc32_of(e.data, e.nbytes()));
  }
  meta[kTensorKey] = sums;
  meta[kMetadataKey] = hex32(metadata_crc(meta));
}

void verify_checksums(const SafetensorsFile& f, bool required) {
  const auto& meta = f.metadata();
  const auto tensors = meta.find(kTensorKey), own = meta.find(kMetadataKey);
  if (!required && tensors == meta.end() && own == meta.end()) return;
  for (const char* key : {kMetadataKey, kTensorKey})
    LS_CHECK_INPUT(meta.count(key), "{}: metadata lacks '{}' (the file is damaged or not lockstep's)", f.path(), key);
  // Metadata first: a damaged file is reported as damaged, whatever else it says.
  LS_CHECK_INPUT(hex32(metadata_crc(meta)) == own->second, "{}: metadata checksum mismatch (the file is damaged)",
                 f.path());
  const std::string& sums = tensors->second;
  size_t checked = 0;
  for (size_t a = 0; a < sums.size();) {
    size_t b = sums.find(';', a);
    if (b == std::string::npos) b = sums.size();
    const std::string item = sums.substr(a, b - a);
    const size_t eq = item.rfind('=');
    LS_CHECK_INPUT(eq != std::string::npos, "{}: malformed tensor checksum list", f.path());
    const std::string name = item.substr(0, eq);
    LS_CHECK_INPUT(f.contains(name), "{}: checksum for missing tensor '{}'", f.path(), name);
    const auto& e = f.entry(name);
    LS_CHECK_INPUT(hex32(crc32_of(e.data, e.nbytes())) == item.substr(eq + 1),
                   "{}: tensor '{}' fails its checksum (the file is damaged)", f.path(), name);
    ++checked;
    a = b + 1;
  }
  LS_CHECK_INPUT(checked == f.names().size(), "{}: {} tensors but {} checksums", f.path(), f.names().size(), checked);
}

}  // namespace lockstep
