// Loading MNIST-format splits from IDX files.
#include "data/mnist.h"

#include <filesystem>

#include "core/input_subject.h"
#include "data/idx.h"

namespace lockstep {
namespace {

std::string find_file(const std::string& dir, const std::string& stem) {
  for (const char* ext : {".gz", ""}) {
    const std::string p = dir + "/" + stem + ext;
    if (std::filesystem::exists(p)) return p;
  }
  LS_INPUT_ERROR("data directory {}: missing {} (or {}.gz)", dir, stem, stem);
}

std::unique_ptr<InMemoryDataset> load_split(const std::string& dir, const std::string& name, const std::string& prefix) {
  const std::string ipath = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string lpath = find_file(dir, prefix + "-labels-idx1-ubyte");
  IdxArray im = read_idx(ipath);
  IdxArray lb = read_idx(lpath);
  LS_CHECK_INPUT(im.dims.size() == 3, "{}: images need 3 dimensions [N, H, W], file has {}", ipath, im.dims.size());
  LS_CHECK_INPUT(lb.dims.size() == 1, "{}: labels need 1 dimension [N], file has {}", lpath, lb.dims.size());
  LS_CHECK_INPUT(im.dims[0] == lb.dims[0], "{}: {} images but {} has {} labels", ipath, im.dims[0], lpath, lb.dims[0]);
  const int64_t n = im.dims[0], h = im.dims[1], w = im.dims[2];
  Tensor images = Tensor::zeros(Shape{n, 1, h, w}, DType::U8);
  std::copy(im.data.begin(), im.data.end(), images.data<uint8_t>());
  Tensor labels = Tensor::zeros(Shape{n}, DType::I32);
  int32_t* l = labels.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    LS_CHECK_INPUT(lb.data[static_cast<size_t>(i)] < 10, "{}: label {} of sample {} is outside [0, 10)", lpath,
                   lb.data[static_cast<size_t>(i)], i);
    l[i] = lb.data[static_cast<size_t>(i)];
  }
  return std::make_unique<InMemoryDataset>(name + "/" + prefix, std::move(images), std::move(labels), 10,
                                           Normalization{});
}

}  // namespace

MnistSplits load_mnist_format(const std::string& dir, const std::string& name) {
  LS_CHECK_INPUT_ON(std::filesystem::is_directory(dir), subject::kDataDirectory, " {}: not a directory", dir);
  MnistSplits s;
  s.train = load_split(dir, name, "train");
  s.test = load_split(dir, name, "t10k");
  LS_CHECK_INPUT(s.train->sample_shape() == s.test->sample_shape(), "{}: train images are {} but test images are {}",
                 dir, s.train->sample_shape().str(), s.test->sample_shape().str());
  const Normalization norm = s.train->pixel_statistics();
  s.train->set_normalization(norm);
  s.test->set_normalization(norm);
  return s;
}

}  // namespace lockstep
