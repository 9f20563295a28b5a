// CIFAR-10 binary reader (round trip, every damaged-input case), the
// crop-and-flip augmentation (against a reference with an explicit padded
// image, determinism, statistics) and the loader's per-batch transform.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "data/augment.h"
#include "data/cifar10.h"
#include "data/loader.h"
#include "data/synthetic.h"
#include "temp_dir.h"

using namespace lockstep;
using lockstep::testing::TempDir;

namespace {

// Pixel byte of record r, channel c, row y, column x: distinct per channel so
// a channel-order mix-up shows.
uint8_t pixel(int64_t r, int64_t c, int64_t y, int64_t x) {
  return static_cast<uint8_t>((r * 37 + c * 85 + y * 7 + x * 3) % 256);
}

std::vector<uint8_t> records(int64_t first, int64_t n) {
  std::vector<uint8_t> b;
  for (int64_t r = first; r < first + n; ++r) {
    b.push_back(static_cast<uint8_t>(r % 10));
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < 32; ++y)
        for (int64_t x = 0; x < 32; ++x) b.push_back(pixel(r, c, y, x));
  }
  return b;
}

// Training files hold 1, 2, 3, 1, 2 records (records 0..8 in order); the test file 4 (records 100..103).
void write_cifar(const TempDir& dir) {
  const int64_t counts[5] = {1, 2, 3, 1, 2};
  int64_t r = 0;
  for (int b = 0; b < 5; ++b) {
    lockstep::testing::write_bytes(dir.file(fmt::format("data_batch_{}.bin", b + 1)), records(r, counts[b]));
    r += counts[b];
  }
  lockstep::testing::write_bytes(dir.file("test_batch.bin"), records(100, 4));
}

std::string load_error(const std::string& dir) {
  try {
    load_cifar10(dir);
  } catch (const InputError& e) {
    return e.message();
  }
  return "no error";
}

// Reference augmentation: build the zero-padded image, crop, then mirror.
std::vector<float> reference(const std::vector<float>& in, const Shape& s, int64_t pad, const CropFlipDraw& d) {
  const int64_t C = s[0], H = s[1], W = s[2], PH = H + 2 * pad, PW = W + 2 * pad;
  std::vector<float> padded(static_cast<size_t>(C * PH * PW), 0.f), out(in.size());
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x)
        padded[static_cast<size_t>((c * PH + y + pad) * PW + x + pad)] = in[static_cast<size_t>((c * H + y) * W + x)];
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) {
        const int64_t cx = d.flip ? W - 1 - x : x;  // column of the crop this output pixel shows
        out[static_cast<size_t>((c * H + y) * W + x)] =
            padded[static_cast<size_t>((c * PH + y + d.dy) * PW + cx + d.dx)];
      }
  return out;
}

std::vector<float> ramp(int64_t n, float start = 1.f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<float>(i);  // never 0: padding shows
  return v;
}

}  // namespace

TEST_CASE("CIFAR-10 files round-trip: pixels, channel order, labels, any record count", "[cifar10]") {
  TempDir dir;
  write_cifar(dir);
  std::vector<std::string> paths;
  for (int b = 1; b <= 5; ++b) paths.push_back(dir.file(fmt::format("data_batch_{}.bin", b)));
  auto raw = read_cifar10_files(paths, "raw");  // not normalised: fill gives byte / 255
  REQUIRE(raw->size() == 9);
  REQUIRE(raw->sample_shape() == (Shape{3, 32, 32}));
  CHECK(raw->num_classes() == 10);
  std::vector<int64_t> idx{0, 1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> img(9 * 3072);
  std::vector<int32_t> lab(9);
  raw->fill(idx, img.data(), lab.data());
  int64_t wrong = 0;
  for (int64_t r = 0; r < 9; ++r) {
    CHECK(lab[static_cast<size_t>(r)] == r % 10);
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < 32; ++y)
        for (int64_t x = 0; x < 32; ++x) {
          const float v = img[static_cast<size_t>(((r * 3 + c) * 32 + y) * 32 + x)] * 255.f;
          wrong += std::lround(v) != pixel(r, c, y, x);
        }
  }
  CHECK(wrong == 0);

  Cifar10Splits s = load_cifar10(dir.path().string());
  CHECK(s.train->size() == 9);
  CHECK(s.test->size() == 4);
  CHECK(s.test->sample_shape() == (Shape{3, 32, 32}));
  // Both splits are normalised with the training set's statistics.
  const Normalization n = raw->pixel_statistics();
  CHECK(s.train->input_normalization().first == n.mean);
  CHECK(s.train->input_normalization().second == n.std);
  CHECK(s.test->input_normalization() == s.train->input_normalization());
  std::vector<float> t(3072);
  std::vector<int32_t> tl(1);
  const std::vector<int64_t> one{2};
  s.test->fill(one, t.data(), tl.data());
  CHECK(tl[0] == 102 % 10);
  CHECK(t[1024 + 5 * 32 + 9] == Approx((pixel(102, 1, 5, 9) / 255.f - n.mean) / n.std).margin(1e-5));
}

TEST_CASE("damaged CIFAR-10 directories are input errors naming the file", "[cifar10]") {
  TempDir base;
  CHECK(load_error(base.file("nope")) == "data directory " + base.file("nope") + ": not a directory");

  SECTION("missing training file") {
    TempDir d;
    write_cifar(d);
    std::filesystem::remove(d.file("data_batch_3.bin"));
    CHECK(load_error(d.path().string()).rfind("data directory " + d.path().string() + ": missing data_batch_3.bin", 0) ==
          0);
  }
  SECTION("missing test file") {
    TempDir d;
    write_cifar(d);
    std::filesystem::remove(d.file("test_batch.bin"));
    const std::string m = load_error(d.path().string());
    CHECK(m.find(": missing test_batch.bin (CIFAR-10 binary format") != std::string::npos);
    CHECK(m.find("cifar-10-binary.tar.gz") != std::string::npos);
  }
  SECTION("empty file") {
    TempDir d;
    write_cifar(d);
    lockstep::testing::write_bytes(d.file("data_batch_2.bin"), {});
    CHECK(load_error(d.path().string()).rfind(d.file("data_batch_2.bin") + ": empty file", 0) == 0);
  }
  SECTION("not a whole number of records") {
    TempDir d;
    write_cifar(d);
    auto b = records(0, 3);
    b.resize(b.size() - 100);  // 9119 bytes
    lockstep::testing::write_bytes(d.file("data_batch_3.bin"), b);
    CHECK(load_error(d.path().string()) ==
          d.file("data_batch_3.bin") +
              " is 9119 bytes, not a whole number of 3073-byte records (a label byte, then 3072 pixel bytes)");
  }
  SECTION("a stray byte after whole records") {
    TempDir d;
    write_cifar(d);
    auto b = records(100, 4);
    b.push_back(0);
    lockstep::testing::write_bytes(d.file("test_batch.bin"), b);
    CHECK(load_error(d.path().string()).rfind(d.file("test_batch.bin") + " is 12293 bytes, not a whole number", 0) ==
          0);
  }
  SECTION("label byte out of range") {
    TempDir d;
    write_cifar(d);
    auto b = records(0, 3);
    b[2 * 3073] = 10;  // record 2
    lockstep::testing::write_bytes(d.file("data_batch_4.bin"), b);
    CHECK(load_error(d.path().string()) == d.file("data_batch_4.bin") + ": label 10 of record 2 is outside [0, 10)");
    b[2 * 3073] = 255;
    lockstep::testing::write_bytes(d.file("data_batch_4.bin"), b);
    CHECK(load_error(d.path().string()) == d.file("data_batch_4.bin") + ": label 255 of record 2 is outside [0, 10)");
  }
  SECTION("a directory where a file should be") {
    TempDir d;
    write_cifar(d);
    std::filesystem::remove(d.file("test_batch.bin"));
    std::filesystem::create_directory(d.file("test_batch.bin"));
    CHECK(load_error(d.path().string()) == d.file("test_batch.bin") + ": not a regular file");
  }
}

TEST_CASE("crop-flip matches a padded-image reference for every draw", "[augment]") {
  // Non-square, and smaller than the padding in one direction: whole rows and
  // columns come from the padding; in-place row order matters in both directions.
  for (const Shape& s : {Shape{2, 5, 7}, Shape{3, 32, 32}, Shape{1, 3, 12}}) {
    const std::vector<float> in = ramp(s.numel());
    std::vector<float> row(static_cast<size_t>(s[2]));
    int64_t mismatched = 0;
    for (int64_t dy = 0; dy <= 8; ++dy)
      for (int64_t dx = 0; dx <= 8; ++dx)
        for (bool flip : {false, true}) {
          const CropFlipDraw d{dy, dx, flip};
          std::vector<float> out = in;
          apply_crop_flip(out.data(), s, 4, d, row.data());
          mismatched += out != reference(in, s, 4, d);
        }
    CHECK(mismatched == 0);
  }
}

TEST_CASE("crop-flip: identity at offset (pad, pad), a mirror when flipped, zeros from the padding", "[augment]") {
  const Shape s{3, 32, 32};
  const std::vector<float> in = ramp(s.numel());
  std::vector<float> row(32);
  std::vector<float> out = in;
  apply_crop_flip(out.data(), s, 4, {4, 4, false}, row.data());
  CHECK(out == in);

  out = in;
  apply_crop_flip(out.data(), s, 4, {4, 4, true}, row.data());
  int64_t not_mirrored = 0;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < 32; ++y)
      for (int64_t x = 0; x < 32; ++x)
        not_mirrored += out[static_cast<size_t>((c * 32 + y) * 32 + x)] != in[static_cast<size_t>((c * 32 + y) * 32 + 31 - x)];
  CHECK(not_mirrored == 0);

  // Corner (0, 0): the image moves 4 down and 4 right; the top 4 rows and left 4 columns are padding.
  out = in;
  apply_crop_flip(out.data(), s, 4, {0, 0, false}, row.data());
  int64_t bad = 0;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < 32; ++y)
      for (int64_t x = 0; x < 32; ++x) {
        const float v = out[static_cast<size_t>((c * 32 + y) * 32 + x)];
        if (y < 4 || x < 4)
          bad += v != 0.f;
        else
          bad += v != in[static_cast<size_t>((c * 32 + y - 4) * 32 + x - 4)];
      }
  CHECK(bad == 0);
  // Corner (8, 8): the bottom 4 rows and right 4 columns are padding.
  out = in;
  apply_crop_flip(out.data(), s, 4, {8, 8, false}, row.data());
  int64_t zeros = 0;
  for (int64_t y = 0; y < 32; ++y)
    for (int64_t x = 0; x < 32; ++x) zeros += out[static_cast<size_t>(y * 32 + x)] == 0.f;
  CHECK(zeros == 32 * 32 - 28 * 28);
  CHECK(out[static_cast<size_t>(27 * 32 + 27)] == in[static_cast<size_t>(31 * 32 + 31)]);
}

TEST_CASE("crop-flip draws are a pure function of (seed, epoch, sample)", "[augment]") {
  int64_t differ_epoch = 0, differ_seed = 0;
  for (int64_t i = 0; i < 200; ++i) {
    const CropFlipDraw a = crop_flip_draw(42, 3, i), b = crop_flip_draw(42, 3, i);
    REQUIRE((a.dy == b.dy && a.dx == b.dx && a.flip == b.flip));
    REQUIRE((a.dy >= 0 && a.dy <= 8 && a.dx >= 0 && a.dx <= 8));
    const CropFlipDraw e = crop_flip_draw(42, 4, i), s = crop_flip_draw(43, 3, i);
    differ_epoch += a.dy != e.dy || a.dx != e.dx || a.flip != e.flip;
    differ_seed += a.dy != s.dy || a.dx != s.dx || a.flip != s.flip;
  }
  // Two independent draws agree with probability 1/162.
  CHECK(differ_epoch > 190);
  CHECK(differ_seed > 190);

  // A batch: same key, same output; the output of a sample does not depend on
  // its position in the batch (so not on the world size); another epoch crops differently.
  const Shape s{3, 32, 32};
  const int64_t per = s.numel();
  const std::vector<int64_t> samples{17, 4, 99, 123456789};
  std::vector<float> batch;
  for (int64_t k = 0; k < 4; ++k) {
    const auto r = ramp(per, static_cast<float>(k * 10000 + 1));
    batch.insert(batch.end(), r.begin(), r.end());
  }
  std::vector<float> a = batch, b = batch, e = batch;
  crop_flip_batch(a.data(), samples, s, 42, 3);
  crop_flip_batch(b.data(), samples, s, 42, 3);
  crop_flip_batch(e.data(), samples, s, 42, 4);
  CHECK(a == b);
  CHECK(a != e);
  std::vector<float> last(batch.end() - per, batch.end());  // sample 123456789 alone
  const std::vector<int64_t> one{123456789};
  crop_flip_batch(last.data(), one, s, 42, 3);
  CHECK(std::equal(last.begin(), last.end(), a.end() - per));
  std::vector<float> row(32);
  std::vector<float> first(batch.begin(), batch.begin() + per);
  apply_crop_flip(first.data(), s, 4, crop_flip_draw(42, 3, 17), row.data());
  CHECK(std::equal(first.begin(), first.end(), a.begin()));
}

TEST_CASE("crop-flip statistics: half flipped, all 81 offsets, roughly uniform", "[augment]") {
  const int64_t n = 40000;
  int64_t flipped = 0;
  std::map<std::pair<int64_t, int64_t>, int64_t> offsets;
  for (int64_t i = 0; i < n; ++i) {
    const CropFlipDraw d = crop_flip_draw(7, i % 3, i);
    flipped += d.flip;
    ++offsets[{d.dy, d.dx}];
  }
  CHECK(std::abs(static_cast<double>(flipped) / n - 0.5) < 0.01);  // 4 standard deviations
  REQUIRE(offsets.size() == 81);
  for (const auto& [o, count] : offsets) {
    INFO("offset (" << o.first << ", " << o.second << ")");
    CHECK(std::abs(static_cast<double>(count) - n / 81.0) < 5 * std::sqrt(n / 81.0));  // expected 494 +- 22
  }
}

TEST_CASE("the loader's transform edits each batch on the producer thread after fill", "[augment]") {
  SyntheticDataset d("s", Shape{1, 2, 2}, 3, 50, 1);
  PrefetchLoader loader(d, 8, 3);
  const auto consumer = std::this_thread::get_id();
  std::vector<std::thread::id> threads(6);
  loader.begin(
      6, [](int64_t k, std::vector<int64_t>& out) { out.assign({k, k + 10, k + 20}); },
      [&](int64_t k, std::span<const int64_t> idx, float* images) {
        threads[static_cast<size_t>(k)] = std::this_thread::get_id();
        for (size_t j = 0; j < idx.size(); ++j)
          for (int e = 0; e < 4; ++e) images[j * 4 + e] += 1000.f * static_cast<float>(idx[j]);
      });
  for (int64_t k = 0; k < 6; ++k) {
    const Batch& b = loader.next();
    std::vector<float> expect(12);
    std::vector<int32_t> labels(3);
    const std::vector<int64_t> idx{k, k + 10, k + 20};
    d.fill(idx, expect.data(), labels.data());
    for (size_t j = 0; j < 3; ++j)
      for (int e = 0; e < 4; ++e) expect[j * 4 + e] += 1000.f * static_cast<float>(idx[j]);
    REQUIRE(b.inputs.to_vector() == expect);
  }
  for (const auto& id : threads) CHECK(id != consumer);

  // No transform: the next sequence is plain again; a throwing transform surfaces from next().
  loader.begin(1, [](int64_t, std::vector<int64_t>& out) { out.assign({3}); });
  std::vector<float> plain(4);
  std::vector<int32_t> l(1);
  const std::vector<int64_t> three{3};
  d.fill(three, plain.data(), l.data());
  CHECK(loader.next().inputs.to_vector() == plain);
  loader.begin(
      2, [](int64_t, std::vector<int64_t>& out) { out.assign({1}); },
      [](int64_t k, std::span<const int64_t>, float*) {
        if (k == 1) LS_THROW("transform failed on batch {}", k);
      });
  CHECK_NOTHROW(loader.next());
  CHECK_THROWS_WITH(loader.next(), Catch::Contains("transform failed on batch 1"));
}
