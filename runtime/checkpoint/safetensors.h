// The safetensors format (https://github.com/huggingface/safetensors):
//   8 bytes   little-endian u64 N, the header length
//   N bytes   JSON: {"name": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...,
//                    "__metadata__": {"key": "value", ...}}   (padded with spaces)
//   rest      the tensors' raw little-endian bytes; offsets relative to its start
// The reader checks everything a damaged or hostile file could get wrong and
// reports it as an InputError naming the file. It reads dtype BOOL as U8.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace lockstep {

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  Shape shape;
  const void* data;  // nbytes() = shape.numel() * size_of(dtype) bytes
  size_t nbytes() const { return static_cast<size_t>(shape.numel()) * size_of(dtype); }
};

// Writes atomically (see atomic_file.h). Entries keep the given order in the data.
void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                       const std::map<std::string, std::string>& metadata = {});

class SafetensorsFile {
 public:
  static SafetensorsFile read(const std::string& path);
  SafetensorsFile(SafetensorsFile&&) = default;  // entries point into bytes_: move only
  SafetensorsFile& operator=(SafetensorsFile&&) = default;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::vector<std::string> names() const;  // in data order
  bool contains(const std::string& name) const { return index_.count(name) > 0; }
  const SafetensorsEntry& entry(const std::string& name) const;  // InputError if absent

 private:
  SafetensorsFile() = default;
  std::string path_;
  std::vector<uint8_t> bytes_;  // the whole file
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace lockstep
