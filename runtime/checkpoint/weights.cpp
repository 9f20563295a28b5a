// Weights save/load with checksums and strict name, shape and dtype checks.
#include "checkpoint/weights.h"

#include <cstring>

#include "checkpoint/checksums.h"
#include "checkpoint/safetensors.h"

namespace lockstep {

void save_weights(const std::string& path, const Model& model, std::map<std::string, std::string> metadata) {
  std::vector<SafetensorsEntry> entries;
  std::vector<Tensor> host;  // host copies of GPU tensors, alive until written
  host.reserve(model.state().size());
  for (const Parameter* p : model.state()) {
    host.push_back(on_host(p->value));
    entries.push_back({p->name, DType::F32, p->shape, host.back().raw_data()});
  }
  metadata["format"] = "pt";
  metadata["lockstep_model"] = model.name();
  add_checksums(entries, metadata);
  write_safetensors(path, entries, metadata);
}

void load_weights(const std::string& path, Model& model) {
  const SafetensorsFile f = SafetensorsFile::read(path);
  // Validate everything before touching the model. Files from other tools
  // carry no checksums; ours do, so damage to them is named as such.
  verify_checksums(f, /*required=*/false);
  for (const Parameter* p : model.state()) {
    LS_CHECK_INPUT(f.contains(p->name), "{}: missing tensor '{}' that model {} needs", path, p->name, model.name());
    const auto& e = f.entry(p->name);
    LS_CHECK_INPUT(e.dtype == DType::F32, "{}: tensor '{}' is {}, expected F32", path, p->name, dtype_name(e.dtype));
    LS_CHECK_INPUT(e.shape == p->shape, "{}: tensor '{}' has shape {}, model {} expects {}", path, p->name,
                   e.shape.str(), model.name(), p->shape.str());
  }
  for (const auto& name : f.names())
    LS_CHECK_INPUT(model.params().find(name) != nullptr || model.buffers().find(name) != nullptr,
                   "{}: tensor '{}' is not a parameter of model {}", path, name, model.name());
  for (Parameter* p : model.state()) {
    const auto& e = f.entry(p->name);
    copy_from_host(p->value, e.data);
  }
}

}  // namespace lockstep
