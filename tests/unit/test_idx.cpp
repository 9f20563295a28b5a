// IDX reader and MNIST-format loader on generated files, good and malformed.
#include <catch2/catch.hpp>

#include "data/idx.h"
#include "data/mnist.h"
#include "temp_dir.h"

using namespace lockstep;
using lockstep::testing::TempDir;

namespace {

std::vector<uint8_t> idx_bytes(uint8_t type, const std::vector<uint32_t>& dims, size_t payload) {
  std::vector<uint8_t> b{0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>((d >> s) & 0xff));
  for (size_t i = 0; i < payload; ++i) b.push_back(static_cast<uint8_t>(i * 7));
  return b;
}

// The message of the InputError raised by reading `path`.
std::string idx_error(const std::string& path) {
  try {
    read_idx(path);
  } catch (const InputError& e) {
    return e.message();
  }
  return "no error";
}

void write_split(const TempDir& dir, const std::string& prefix, int64_t n, bool gzip, uint8_t max_label = 9) {
  std::vector<uint8_t> pixels(static_cast<size_t>(n * 28 * 28));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i % 251);
  std::vector<uint8_t> labels(static_cast<size_t>(n));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<uint8_t>(i % (max_label + 1u));
  const std::string ext = gzip ? ".gz" : "";
  write_idx(dir.file(prefix + "-images-idx3-ubyte" + ext), {n, 28, 28}, pixels, gzip);
  write_idx(dir.file(prefix + "-labels-idx1-ubyte" + ext), {n}, labels, gzip);
}

}  // namespace

TEST_CASE("IDX files round-trip, plain and gzip", "[idx]") {
  TempDir dir;
  std::vector<uint8_t> data(2 * 3 * 4);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i);
  for (bool gz : {false, true}) {
    const std::string p = dir.file(gz ? "a.gz" : "a");
    write_idx(p, {2, 3, 4}, data, gz);
    const IdxArray a = read_idx(p);
    CHECK(a.dims == std::vector<int64_t>{2, 3, 4});
    CHECK(a.data == data);
  }
}

TEST_CASE("malformed IDX files are clear input errors", "[idx]") {
  TempDir dir;
  struct Case {
    const char* name;
    std::vector<uint8_t> bytes;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"empty", {}, "file is truncated: the header needs 4 bytes"},
      {"short-header", {0, 0, 8}, "file is truncated: the header"},
      {"bad-magic", idx_bytes(8, {2}, 2), ""},  // patched below
      {"float-type", idx_bytes(0x0D, {2}, 8), "IDX element type 0x0d is not supported"},
      {"zero-dims", idx_bytes(8, {}, 0), "IDX file has 0 dimensions"},
      {"five-dims", idx_bytes(8, {1, 1, 1, 1, 1}, 1), "IDX file has 5 dimensions"},
      {"zero-extent", idx_bytes(8, {3, 0}, 0), "dimension 1 has size 0"},
      {"short-dims", {0, 0, 8, 2, 0, 0, 0, 5, 0, 0}, "the dimension sizes needs 4 bytes"},
      {"truncated-data", idx_bytes(8, {10, 10}, 57), "the data needs 100 bytes, only 57 present"},
      {"trailing", idx_bytes(8, {4}, 5), "unexpected bytes after the 4 elements"},
      {"absurd", idx_bytes(8, {0xffffffff, 0xffffffff, 4}, 0), "describe more than"},
  };
  for (auto c : cases) {
    if (std::string(c.name) == "bad-magic") {
      c.bytes[0] = 0x1f;
      c.bytes[1] = 0x00;
      c.expect = "not an IDX file (magic bytes 1f 00";
    }
    const std::string p = dir.file(c.name);
    lockstep::testing::write_bytes(p, c.bytes);
    INFO(c.name);
    const std::string msg = idx_error(p);
    CHECK(msg.find(c.expect) != std::string::npos);
    CHECK(msg.find(p) == 0);  // names the file first
  }
  CHECK(idx_error(dir.file("missing")).find("no such file") != std::string::npos);
  CHECK(idx_error(dir.path().string()).find("not a regular file") != std::string::npos);
}

TEST_CASE("corrupt and truncated gzip IDX files are clear input errors", "[idx]") {
  TempDir dir;
  std::vector<uint8_t> data(5000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>((i * 31) ^ (i >> 3));
  write_idx(dir.file("g.gz"), {50, 100}, data, true);
  auto bytes = lockstep::testing::read_bytes(dir.file("g.gz"));
  auto truncated = bytes;
  truncated.resize(bytes.size() / 2);
  lockstep::testing::write_bytes(dir.file("t.gz"), truncated);
  CHECK(idx_error(dir.file("t.gz")).find("truncated") != std::string::npos);
  auto corrupt = bytes;
  for (size_t i = 20; i < 60 && i < corrupt.size(); ++i) corrupt[i] ^= 0x5a;
  lockstep::testing::write_bytes(dir.file("c.gz"), corrupt);
  const std::string msg = idx_error(dir.file("c.gz"));
  CHECK((msg.find("corrupt") != std::string::npos || msg.find("truncated") != std::string::npos));
}

TEST_CASE("MNIST-format directories load, normalised by training statistics", "[idx]") {
  TempDir dir;
  write_split(dir, "train", 20, true);
  write_split(dir, "t10k", 7, false);
  MnistSplits s = load_mnist_format(dir.path().string(), "tiny");
  CHECK(s.train->size() == 20);
  CHECK(s.test->size() == 7);
  CHECK(s.train->sample_shape() == (Shape{1, 28, 28}));
  // Normalised training pixels have mean ~0 and std ~1.
  std::vector<float> img(20 * 784);
  std::vector<int32_t> lab(20);
  std::vector<int64_t> idx(20);
  for (int64_t i = 0; i < 20; ++i) idx[static_cast<size_t>(i)] = i;
  s.train->fill(idx, img.data(), lab.data());
  double sum = 0, sq = 0;
  for (float v : img) {
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  CHECK(sum / img.size() == Approx(0).margin(1e-4));
  CHECK(sq / img.size() == Approx(1).epsilon(1e-3));
  CHECK(lab[13] == 13 % 10);
}

TEST_CASE("bad MNIST-format directories are clear input errors", "[idx]") {
  auto message = [](const std::string& dir) {
    try {
      load_mnist_format(dir, "x");
    } catch (const InputError& e) {
      return e.message();
    }
    return std::string("no error");
  };
  TempDir missing_dir;
  CHECK(message(missing_dir.file("nope")).find("not a directory") != std::string::npos);
  TempDir empty;
  CHECK(message(empty.path().string()).find("missing train-images-idx3-ubyte") != std::string::npos);
  TempDir bad_label;
  write_split(bad_label, "train", 12, false, 11);
  write_split(bad_label, "t10k", 3, false);
  CHECK(message(bad_label.path().string()).find("label 10 of sample 10 is outside [0, 10)") != std::string::npos);
  TempDir mismatch;
  write_split(mismatch, "train", 5, false);
  write_split(mismatch, "t10k", 3, false);
  write_idx(mismatch.file("train-labels-idx1-ubyte"), {4}, {1, 2, 3, 4}, false);
  CHECK(message(mismatch.path().string()).find("5 images but") != std::string::npos);
}
