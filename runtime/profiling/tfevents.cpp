// EventFileWriter: TFRecord framing, CRC-32C and the few protobuf fields of
// tensorflow.Event that scalar summaries use (see tfevents.h).
#include "profiling/tfevents.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace lockstep {
namespace {

// Reflected CRC-32C table (polynomial 0x82F63B78).
constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kCrcTable = make_crc_table();

// Protobuf wire encoding: varints, keys (field << 3 | wire type), fixed-width
// little-endian numbers, length-delimited fields.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
template <typename T>
void put_fixed(std::string& out, T v) {  // x86-64 and aarch64 are little-endian, as the format
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}
enum Wire : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };
void put_key(std::string& out, uint32_t field, Wire wire) { put_varint(out, field << 3 | wire); }
void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, kBytes);
  put_varint(out, bytes.size());
  out.append(bytes);
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Event { wall_time = 1 (double), step = 2 (int64) } plus the caller's field.
std::string event_head(double wall_time, int64_t step) {
  std::string e;
  put_key(e, 1, kFixed64);
  put_fixed(e, wall_time);
  if (step != 0) {
    put_key(e, 2, kVarint);
    put_varint(e, static_cast<uint64_t>(step));
  }
  return e;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) c = kCrcTable[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

EventFileWriter::EventFileWriter(const std::string& dir, const std::string& what) : what_(what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) LS_INPUT_ERROR("{}: cannot create directory {} ({})", what_, dir, ec.message());
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  const auto seconds = static_cast<long long>(unix_seconds());
  // TensorBoard sorts a run's files by name: a second file within the same
  // second gets a suffix rather than replacing the first.
  std::string base = (fs::path(dir) / fmt::format("events.out.tfevents.{}.{}", seconds, host)).string();
  path_ = base;
  for (int i = 1; fs::exists(path_); ++i) path_ = fmt::format("{}.{}", base, i);
  f_ = std::fopen(path_.c_str(), "wb");
  if (!f_) LS_INPUT_ERROR("{}: cannot open {} ({})", what_, path_, std::strerror(errno));
  std::string e = event_head(unix_seconds(), 0);
  put_bytes(e, 3, "brain.Event:2");
  record(e);
}

EventFileWriter::~EventFileWriter() {
  if (f_) std::fclose(f_);
}

void EventFileWriter::scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  std::string summary;
  for (const auto& [tag, v] : values) {
    std::string value;
    put_bytes(value, 1, tag);
    put_key(value, 2, kFixed32);
    put_fixed(value, static_cast<float>(v));
    put_bytes(summary, 1, value);
  }
  std::string e = event_head(unix_seconds(), step);
  put_bytes(e, 5, summary);
  record(e);
}

void EventFileWriter::record(std::string_view data) {
  std::string r;
  const uint64_t n = data.size();
  put_fixed(r, n);
  put_fixed(r, masked_crc32c(r.data(), sizeof n));
  r.append(data);
  put_fixed(r, masked_crc32c(data.data(), data.size()));
  if (std::fwrite(r.data(), 1, r.size(), f_) != r.size() || std::fflush(f_) != 0)
    LS_INPUT_ERROR("{}: write to {} failed ({})", what_, path_, std::strerror(errno));
}

}  // namespace lockstep
