// TensorBoard event files (profiling/tfevents.h): CRC-32C against the standard
// check value, the TFRecord framing read back record by record with both
// checksums verified, the protobuf bytes of a scalar event, and unusable
// directories. tests/interop/tensorboard_reads_events.py has TensorBoard's own
// reader open a trainer's files.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "profiling/tfevents.h"
#include "temp_dir.h"

using namespace lockstep;

namespace {

// The records of an event file, each checked against its masked CRCs.
std::vector<std::string> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  size_t at = 0;
  while (at < bytes.size()) {
    REQUIRE(bytes.size() - at >= 12);
    uint64_t n;
    uint32_t head_crc, data_crc;
    std::memcpy(&n, bytes.data() + at, 8);
    std::memcpy(&head_crc, bytes.data() + at + 8, 4);
    REQUIRE(head_crc == masked_crc32c(bytes.data() + at, 8));
    REQUIRE(bytes.size() - at - 12 >= n + 4);
    records.emplace_back(bytes.substr(at + 12, n));
    std::memcpy(&data_crc, bytes.data() + at + 12 + n, 4);
    REQUIRE(data_crc == masked_crc32c(records.back().data(), n));
    at += 12 + n + 4;
  }
  return records;
}

}  // namespace

TEST_CASE("crc32c gives the Castagnoli check value", "[tfevents]") {
  CHECK(crc32c("123456789", 9) == 0xE3069283u);  // the standard CRC-32C check value
  CHECK(crc32c("", 0) == 0u);
  const uint32_t c = crc32c("123456789", 9);
  CHECK(masked_crc32c("123456789", 9) == ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST_CASE("event files hold a version record, then one framed event per call", "[tfevents]") {
  testing::TempDir tmp;
  const std::string dir = tmp.file("run/a");  // nested and missing: created
  std::string path;
  {
    EventFileWriter w(dir);
    path = w.path();
    CHECK(path.find("/events.out.tfevents.") != std::string::npos);
    w.scalar(7, "loss", 0.5);
    w.scalars(8, {{"a", 1.0}, {"b", -2.0}});
  }
  const auto records = read_records(path);
  REQUIRE(records.size() == 3);
  CHECK(records[0].find("brain.Event:2") != std::string::npos);
  // Event{wall_time (1, fixed64), step 7 (2, varint), summary (5) {value (1) {tag "loss", simple_value 0.5f}}}
  const std::string& e = records[1];
  REQUIRE(e.size() == 9 + 2 + 2 + 2 + 6 + 5);
  CHECK(static_cast<unsigned char>(e[0]) == 0x09);
  CHECK(std::string(e.substr(9, 2)) == std::string("\x10\x07", 2));
  CHECK(std::string(e.substr(11, 2)) == std::string("\x2a\x0d", 2));  // summary, 13 bytes
  CHECK(std::string(e.substr(13, 2)) == std::string("\x0a\x0b", 2));  // value, 11 bytes
  CHECK(std::string(e.substr(15, 6)) == std::string("\x0a\x04loss", 6));
  float v;
  CHECK(static_cast<unsigned char>(e[21]) == 0x15);
  std::memcpy(&v, e.data() + 22, 4);
  CHECK(v == 0.5f);
  CHECK(records[2].find("\x0a\x01" "a") != std::string::npos);
  CHECK(records[2].find("\x0a\x01" "b") != std::string::npos);

  // A second writer in the same directory (within the same second) never replaces the first file.
  EventFileWriter again(dir);
  CHECK(again.path() != path);
  CHECK(read_records(path).size() == 3);
}

TEST_CASE("event files: a directory that cannot be made is an input error naming it", "[tfevents]") {
  testing::TempDir tmp;
  std::ofstream(tmp.file("file")) << "x";
  CHECK_THROWS_AS(EventFileWriter(tmp.file("file"), "--tensorboard-dir"), InputError);
  try {
    EventFileWriter w(tmp.file("file/sub"), "--tensorboard-dir");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK_THAT(e.message(), Catch::Contains("--tensorboard-dir") && Catch::Contains(tmp.file("file/sub")));
  }
}
