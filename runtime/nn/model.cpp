// Model construction and a printable summary.
#include "nn/model.h"

#include "core/hash.h"

namespace lockstep {

Model::Model(std::string name, Sequential net, Shape sample_shape, int64_t num_classes, uint64_t seed)
    : name_(std::move(name)), net_(std::move(net)), sample_shape_(sample_shape), num_classes_(num_classes) {
  // Images end in [1, classes]; token sequences [T] in [1, T, vocabulary].
  const std::vector<Shape> shapes = net_.shapes(batch_shape(1));
  const Shape expect = sample_shape_.rank() == 1 ? Shape{1, sample_shape_[0], num_classes_} : Shape{1, num_classes_};
  LS_CHECK(shapes.back() == expect, "model {} ends in {}, expected {}", name_, shapes.back().str(), expect.str());
  net_.declare(params_);
  params_.finalize();
  net_.declare_buffers(buffers_);
  for (const auto& b : buffers_.params())
    LS_CHECK(params_.find(b.name) == nullptr, "model {}: buffer {} has a parameter's name", name_, b.name);
  buffers_.finalize();
  Rng rng(rng_key(seed, fnv1a("init")));
  net_.init(rng);
}

std::vector<const Parameter*> Model::state() const {
  std::vector<const Parameter*> out;
  for (const auto& p : params_.params()) out.push_back(&p);
  for (const auto& b : buffers_.params()) out.push_back(&b);
  return out;
}

std::vector<Parameter*> Model::state() {
  std::vector<Parameter*> out;
  for (auto& p : params_.params()) out.push_back(&p);
  for (auto& b : buffers_.params()) out.push_back(&b);
  return out;
}

void Model::to(const std::shared_ptr<Allocator>& allocator) {
  params_.to(allocator);
  buffers_.to(allocator);
}

Shape Model::batch_shape(int64_t batch) const {
  std::vector<int64_t> d{batch};
  for (int64_t e : sample_shape_.dims()) d.push_back(e);
  return Shape(std::span<const int64_t>(d));
}

std::string Model::summary() const {
  std::string s;
  const std::vector<Shape> shapes = net_.shapes(batch_shape(1));
  for (size_t i = 0; i < net_.size(); ++i)
    s += fmt::format("  {:>2}  {:<48} -> {}\n", i, net_.layer(i).describe(), shapes[i].str());
  s += fmt::format("  {} parameters in {} tensors{}, {:.2f} MFLOP forward per sample", params_.numel(),
                   params_.params().size(),
                   buffers_.params().empty() ? std::string()
                                             : fmt::format(" (+ {} buffer values in {} tensors)", buffers_.numel(),
                                                           buffers_.params().size()),
                   static_cast<double>(net_.forward_flops(batch_shape(1))) / 1e6);
  return s;
}

Model::MemoryHeld Model::memory_held() const {
  const auto bytes = [](const Tensor& t) { return static_cast<int64_t>(t.nbytes()); };
  MemoryHeld m;
  m.parameters = bytes(params_.values());
  m.gradients = bytes(params_.grads());
  m.buffers = bytes(buffers_.values()) + bytes(buffers_.grads());
  m.layers = net_.held_memory();
  if (net_.scratch()) m.layers += net_.scratch()->held_memory();
  return m;
}

}  // namespace lockstep
