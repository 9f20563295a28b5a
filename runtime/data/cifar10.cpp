// Reading CIFAR-10 binary files into in-memory data sets. Every file's size is
// checked before anything is read, and records are read straight into the
// data set's tensors (no second copy of the pixels).
#include "data/cifar10.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/input_subject.h"

namespace lockstep {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// Most records one split may hold (the real set has 50,000): 8 GB of pixels, as
// the IDX reader allows, so a damaged or sparse file cannot ask for an absurd allocation.
constexpr int64_t kMaxRecords = (int64_t{1} << 33) / kCifar10PixelBytes;

// Records in a CIFAR-10 file, from its size.
int64_t record_count(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(path, ec);
  LS_CHECK_INPUT(fs::exists(st), "{}: no such file", path);
  LS_CHECK_INPUT(fs::is_regular_file(st), "{}: not a regular file", path);
  const uintmax_t bytes = fs::file_size(path, ec);
  LS_CHECK_INPUT(!ec, "{}: cannot read its size ({})", path, ec.message());
  LS_CHECK_INPUT(bytes > 0, "{}: empty file (CIFAR-10 files hold {}-byte records: a label byte, then {} pixel bytes)",
                 path, kCifar10RecordBytes, kCifar10PixelBytes);
  LS_CHECK_INPUT(bytes % kCifar10RecordBytes == 0,
                 "{} is {} bytes, not a whole number of {}-byte records (a label byte, then {} pixel bytes)", path,
                 bytes, kCifar10RecordBytes, kCifar10PixelBytes);
  return static_cast<int64_t>(bytes / kCifar10RecordBytes);
}

// Reads `records` records of `path` into pixels [records, 3072] and labels [records].
void read_records(const std::string& path, int64_t records, uint8_t* pixels, int32_t* labels) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) LS_INPUT_ERROR("{}: cannot open ({})", path, std::strerror(errno));
  for (int64_t r = 0; r < records; ++r) {
    uint8_t label = 0;
    uint8_t* dst = pixels + r * kCifar10PixelBytes;  // [3, 32, 32]
    const bool ok = std::fread(&label, 1, 1, f.get()) == 1 &&
                    std::fread(dst, 1, kCifar10PixelBytes, f.get()) == static_cast<size_t>(kCifar10PixelBytes);
    // The size was checked: a short read means the file shrank meanwhile or the device failed.
    LS_CHECK_INPUT(ok, "{}: read failed at record {} of {} ({})", path, r, records,
                   std::ferror(f.get()) ? std::strerror(errno) : "the file is shorter than its size said");
    LS_CHECK_INPUT(label < 10, "{}: label {} of record {} is outside [0, 10)", path, label, r);
    labels[r] = label;
  }
}

}  // namespace

std::unique_ptr<InMemoryDataset> read_cifar10_files(const std::vector<std::string>& paths, const std::string& name) {
  std::vector<int64_t> counts;
  int64_t n = 0;
  for (const std::string& p : paths) {
    n += counts.emplace_back(record_count(p));
    LS_CHECK_INPUT(n <= kMaxRecords, "{}: {} has more than the {} records lockstep accepts in one split", p, name,
                   kMaxRecords);
  }
  Tensor images = Tensor::zeros(Shape{n, kCifar10Channels, kCifar10Side, kCifar10Side}, DType::U8);  // [N, 3, 32, 32]
  Tensor labels = Tensor::zeros(Shape{n}, DType::I32);                                               // [N]
  int64_t at = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    read_records(paths[i], counts[i], images.data<uint8_t>() + at * kCifar10PixelBytes, labels.data<int32_t>() + at);
    at += counts[i];
  }
  return std::make_unique<InMemoryDataset>(name, std::move(images), std::move(labels), 10, Normalization{});
}

Cifar10Splits load_cifar10(const std::string& dir) {
  namespace fs = std::filesystem;
  LS_CHECK_INPUT_ON(fs::is_directory(dir), subject::kDataDirectory, " {}: not a directory", dir);
  // Every file is located before any is read, so a missing one is named at once.
  auto locate = [&](const std::string& name) {
    const std::string path = dir + "/" + name;
    std::error_code ec;
    LS_CHECK_INPUT(fs::exists(fs::status(path, ec)),
                   "data directory {}: missing {} (CIFAR-10 binary format: data_batch_1.bin ... data_batch_5.bin and "
                   "test_batch.bin, from {})",
                   dir, name, kCifar10Url);
    return path;
  };
  std::vector<std::string> train_files;
  for (int b = 1; b <= 5; ++b) train_files.push_back(locate(fmt::format("data_batch_{}.bin", b)));
  const std::string test_file = locate("test_batch.bin");

  Cifar10Splits s;
  s.train = read_cifar10_files(train_files, "cifar10/train");
  s.test = read_cifar10_files({test_file}, "cifar10/test");
  const Normalization norm = s.train->pixel_statistics();
  s.train->set_normalization(norm);
  s.test->set_normalization(norm);
  return s;
}

}  // namespace lockstep
