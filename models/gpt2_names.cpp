// The GPT-2 models' Hugging Face weights layout (see gpt2_names.h).
#include "gpt2_names.h"

#include <tuple>

namespace lockstep::models {

std::shared_ptr<const WeightsLayout> gpt2_weights_layout(const Model& model) {
  using Map = WeightsLayout::Map;
  auto layout = std::make_shared<WeightsLayout>();
  const std::string hf = "transformer.";
  auto add = [&](const std::string& ours, const std::string& theirs, Map map = Map::Same, int64_t rows = 0) {
    layout->tensors[ours] = {hf + theirs, map, rows};
  };
  // The net: embedding, L attention and L MLP residuals, ln_f, the tied projection.
  const int64_t blocks = (static_cast<int64_t>(model.net().size()) - 3) / 2;
  add("layers.0.wte", "wte.weight", Map::LeadingRows, model.num_classes());
  add("layers.0.wpe", "wpe.weight");
  for (int64_t l = 0; l < blocks; ++l) {
    const std::string h = fmt::format("h.{}.", l);
    const std::tuple<int64_t, int, const char*> branches[] = {
        {1 + 2 * l, 0, "ln_1"}, {1 + 2 * l, 1, "attn.c_attn"}, {1 + 2 * l, 3, "attn.c_proj"},
        {2 + 2 * l, 0, "ln_2"}, {2 + 2 * l, 1, "mlp.c_fc"},    {2 + 2 * l, 3, "mlp.c_proj"}};
    for (const auto& [layer, index, name] : branches) {
      const std::string ours = fmt::format("layers.{}.branch.{}.", layer, index);
      add(ours + "weight", h + name + ".weight", index == 0 ? Map::Same : Map::Transpose);
      add(ours + "bias", h + name + ".bias");
    }
    layout->ignored.insert(hf + h + "attn.bias");
    layout->ignored.insert(hf + h + "attn.masked_bias");
  }
  add(fmt::format("layers.{}.weight", 1 + 2 * blocks), "ln_f.weight");
  add(fmt::format("layers.{}.bias", 1 + 2 * blocks), "ln_f.bias");
  layout->optional_prefix = hf;
  layout->copies["lm_head.weight"] = hf + "wte.weight";
  for (const Parameter* p : model.state())
    LS_CHECK(layout->tensors.count(p->name), "model {}: '{}' has no Hugging Face name", model.name(), p->name);
  LS_CHECK(layout->tensors.size() == model.state().size(), "model {}: {} Hugging Face names for {} tensors",
           model.name(), layout->tensors.size(), model.state().size());
  return layout;
}

}  // namespace lockstep::models
