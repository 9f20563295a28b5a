// Built-in models: a registry from name to builder. Every builder adapts to the
// sample shape and class count it is given (fully connected input sizes are
// derived from the convolution stack), so synthetic data of other shapes works.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/model.h"

namespace lockstep::models {

struct ModelSpec {
  Shape sample_shape{1, 28, 28};  // [C, H, W] images, or [T] tokens
  int64_t num_classes = 10;       // classes, or the tokens' vocabulary
  // Transformers: layers, heads and channels replacing the model's own (0: keep).
  int64_t n_layer = 0, n_head = 0, n_embd = 0;
};

using Builder = Sequential (*)(const ModelSpec&);

struct ModelInfo {
  std::string name;
  std::string description;
  Builder build;
  // The input the model was designed for ([C, H, W], classes): what --benchmark
  // feeds it as synthetic data (--image-size changes H and W).
  Shape default_shape{1, 28, 28};
  int64_t default_classes = 10;
  // The model reads int32 token sequences [T] (default_shape: [context],
  // default_classes: GPT-2's vocabulary), not fp32 images.
  bool tokens = false;
  // How weights files name and shape its state when not as lockstep's layers
  // do (checkpoint/weights_layout.h); null: as they do.
  std::shared_ptr<const WeightsLayout> (*weights_layout)(const Model&) = nullptr;
};

const std::vector<ModelInfo>& registry();
std::vector<std::string> model_names();
// The registry entry of `name`; InputError naming the known models if none.
const ModelInfo& model_info(const std::string& name);
// InputError naming the unknown model and the known ones, or the model and a
// sample shape its layers cannot take (e.g. 4x4 images for lenet).
std::unique_ptr<Model> build_model(const std::string& name, const ModelSpec& spec, uint64_t seed);

// Builders (one file per model family).
Sequential build_mlp(const ModelSpec& spec);
Sequential build_lenet(const ModelSpec& spec);
Sequential build_convnet(const ModelSpec& spec);
Sequential build_keras_cnn(const ModelSpec& spec);
Sequential build_resnet20(const ModelSpec& spec);
Sequential build_resnet32(const ModelSpec& spec);
Sequential build_resnet56(const ModelSpec& spec);
Sequential build_resnet50(const ModelSpec& spec);
Sequential build_gpt2(const ModelSpec& spec);
Sequential build_gpt2_medium(const ModelSpec& spec);
Sequential build_gpt2_tiny(const ModelSpec& spec);

// GPT-2's BPE vocabulary: 50,256 merges and <|endoftext|>.
inline constexpr int64_t kGpt2Vocab = 50257;

// Flattened feature count after the layers added so far, for sizing the first Linear.
int64_t flat_features(const Sequential& net, const ModelSpec& spec);

}  // namespace lockstep::models
