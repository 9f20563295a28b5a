// Weights save/load with checksums, strict name, shape and dtype checks, and
// a model's weights layout (file names, transposed and cropped tensors).
#include "checkpoint/weights.h"

#include <cstring>
#include <set>

#include "checkpoint/checksums.h"
#include "checkpoint/weights_layout.h"

namespace lockstep {

Shape WeightsLayout::file_shape(const FileTensor& t, const Shape& shape) {
  Shape s = shape;
  if (t.map == Map::Transpose) {
    s[0] = shape[1];
    s[1] = shape[0];
  }
  if (t.map == Map::LeadingRows) s[0] = t.rows;
  return s;
}

namespace {

WeightsLayout::FileTensor file_tensor(const Model& model, const Parameter& p) {
  const WeightsLayout* layout = model.weights_layout();
  if (!layout) return {p.name};
  const auto it = layout->tensors.find(p.name);
  LS_CHECK(it != layout->tensors.end(), "model {}: its weights layout has no file tensor for '{}'", model.name(),
           p.name);
  LS_CHECK(it->second.map != WeightsLayout::Map::Transpose || p.shape.rank() == 2,
           "model {}: '{}' of shape {} cannot be stored transposed", model.name(), p.name, p.shape.str());
  return it->second;
}

// [R, C] floats -> [C, R].
void transpose(const float* src, float* dst, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
}

// What the file calls a layout name: the name, or the name without the
// layout's optional prefix; empty when the file holds neither.
std::string name_in(const SafetensorsFile& f, const WeightsLayout* layout, const std::string& name) {
  if (f.contains(name)) return name;
  if (layout && !layout->optional_prefix.empty() && name.starts_with(layout->optional_prefix)) {
    std::string bare = name.substr(layout->optional_prefix.size());
    if (f.contains(bare)) return bare;
  }
  return {};
}

struct Source {
  Parameter* p;
  WeightsLayout::FileTensor t;
  const SafetensorsEntry* e;
};

}  // namespace

WeightsTensors weights_tensors(const Model& model, bool gradients) {
  WeightsTensors out;
  const std::vector<const Parameter*> state = model.state();
  out.storage.reserve(2 * state.size());
  for (const Parameter* p : state) {
    if (gradients && model.params().find(p->name) == nullptr) continue;  // a buffer
    const WeightsLayout::FileTensor t = file_tensor(model, *p);
    const Shape shape = WeightsLayout::file_shape(t, p->shape);
    const Tensor& src = out.storage.emplace_back(on_host(gradients ? p->grad : p->value));
    const void* data = src.raw_data();  // Same, and LeadingRows: a prefix of the rows
    if (t.map == WeightsLayout::Map::Transpose) {
      const Tensor& dst = out.storage.emplace_back(Tensor::zeros(shape));
      transpose(src.data<float>(), dst.data<float>(), p->shape[0], p->shape[1]);
      data = dst.raw_data();
    }
    out.entries.push_back({t.name, DType::F32, shape, data});
  }
  return out;
}

void save_weights(const std::string& path, const Model& model, std::map<std::string, std::string> metadata) {
  const WeightsTensors w = weights_tensors(model);
  metadata["format"] = "pt";
  metadata["lockstep_model"] = model.name();
  add_checksums(w.entries, metadata);
  write_safetensors(path, w.entries, metadata);
}

void load_weights(const std::string& path, Model& model) {
  const SafetensorsFile f = SafetensorsFile::read(path);
  const WeightsLayout* layout = model.weights_layout();
  // Validate everything before touching the model. Files from other tools
  // carry no checksums; ours do, so damage to them is named as such.
  verify_checksums(f, /*required=*/false);
  std::vector<Source> sources;
  std::set<std::string> read;  // the file's names that sources read
  for (Parameter* p : model.state()) {
    const WeightsLayout::FileTensor t = file_tensor(model, *p);
    const std::string name = name_in(f, layout, t.name);
    LS_CHECK_INPUT(!name.empty(), "{}: missing tensor '{}' that model {} needs", path, t.name, model.name());
    const auto& e = f.entry(name);
    const Shape shape = WeightsLayout::file_shape(t, p->shape);
    LS_CHECK_INPUT(e.dtype == DType::F32, "{}: tensor '{}' is {}, expected F32", path, name, dtype_name(e.dtype));
    LS_CHECK_INPUT(e.shape == shape, "{}: tensor '{}' has shape {}, model {} expects {}", path, name, e.shape.str(),
                   model.name(), shape.str());
    sources.push_back({p, t, &e});
    read.insert(name);
  }
  std::set<std::string> accepted = read;
  if (layout) {
    for (const auto& n : layout->ignored)
      if (auto name = name_in(f, layout, n); !name.empty()) accepted.insert(name);
    for (const auto& [copy, original] : layout->copies) {
      const std::string name = name_in(f, layout, copy), of = name_in(f, layout, original);
      if (name.empty()) continue;
      LS_CHECK(!of.empty() && read.count(of), "model {}: '{}' copies '{}', which the model does not read",
               model.name(), copy, original);
      const auto &e = f.entry(name), &o = f.entry(of);
      LS_CHECK_INPUT(e.dtype == o.dtype && e.shape == o.shape && std::memcmp(e.data, o.data, e.nbytes()) == 0,
                     "{}: tensor '{}' differs from '{}' (model {} ties them: they must be equal)", path, name, of,
                     model.name());
      accepted.insert(name);
    }
  }
  for (const auto& name : f.names())
    LS_CHECK_INPUT(accepted.count(name), "{}: tensor '{}' is not a parameter of model {}", path, name, model.name());
  for (const Source& s : sources) {
    const float* data = static_cast<const float*>(s.e->data);
    if (s.t.map == WeightsLayout::Map::Same) {
      copy_from_host(s.p->value, data);
      continue;
    }
    Tensor host = Tensor::zeros(s.p->shape);  // LeadingRows: the rows past the file's stay zero
    if (s.t.map == WeightsLayout::Map::Transpose)
      transpose(data, host.data<float>(), s.p->shape[1], s.p->shape[0]);
    else
      std::memcpy(host.raw_data(), data, s.e->nbytes());
    copy_from_host(s.p->value, host.raw_data());
  }
}

}  // namespace lockstep
