// TensorBoard event files: scalars written the way TensorFlow's EventsWriter
// does, so `tensorboard --logdir DIR` (and its EventFileLoader /
// EventAccumulator) read them with no TensorFlow or protobuf library here.
//
// A file events.out.tfevents.<unix seconds>.<host> in the directory holds
// TFRecords, each
//   uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
// (little-endian; masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8), and each
// record's data is a serialised tensorflow.Event:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
// The first record is the file_version "brain.Event:2". Records are flushed as
// written, so a running job can be followed.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockstep {

// CRC-32C (Castagnoli) of `n` bytes, and TFRecord's masked form of it.
uint32_t crc32c(const void* data, size_t n);
uint32_t masked_crc32c(const void* data, size_t n);

class EventFileWriter {
 public:
  // Creates `dir` if missing and a new event file in it (InputError naming
  // `what`, the option that gave the directory, if either fails).
  explicit EventFileWriter(const std::string& dir, const std::string& what = "tensorboard directory");
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  // One event at `step` holding every (tag, value) pair, stamped with the
  // current wall time.
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  void scalar(int64_t step, const std::string& tag, double value) { scalars(step, {{tag, value}}); }
  const std::string& path() const { return path_; }

 private:
  void record(std::string_view data);
  std::FILE* f_ = nullptr;
  std::string path_, what_;
};

}  // namespace lockstep
