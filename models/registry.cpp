// Model registry.
#include "registry.h"

#include "gpt2_names.h"

namespace lockstep::models {

const std::vector<ModelInfo>& registry() {
  static const std::vector<ModelInfo> models = {
      {"mlp", "784-256-10 perceptron with ReLU", build_mlp},
      {"lenet", "LeNet variant: conv3x3-20, avgpool, conv5x5-50, avgpool, fc128, fc10", build_lenet},
      {"convnet", "6-conv CNN (5x5/3x3, 128 channels, 'same' padding) from the multi-GPU notebook", build_convnet},
      {"keras-cnn", "Keras MNIST CNN: conv32, conv64, maxpool, dropout, fc128, dropout, fc10", build_keras_cnn},
      {"resnet20", "CIFAR ResNet-20: 3 stages x 3 basic blocks (16/32/64 channels), batch norm", build_resnet20,
       Shape{3, 32, 32}, 10},
      {"resnet32", "CIFAR ResNet-32: 3 stages x 5 basic blocks (16/32/64 channels), batch norm", build_resnet32,
       Shape{3, 32, 32}, 10},
      {"resnet56", "CIFAR ResNet-56: 3 stages x 9 basic blocks (16/32/64 channels), batch norm", build_resnet56,
       Shape{3, 32, 32}, 10},
      {"resnet50", "ResNet-50 v1.5: 4 stages of 3/4/6/3 bottleneck blocks, batch norm (224x224x3, 1000 classes)",
       build_resnet50, Shape{3, 224, 224}, 1000},
      {"gpt2", "GPT-2 small (124M): 12 layers, 12 heads, 768 channels, context 1024, tied embeddings", build_gpt2,
       Shape{1024}, kGpt2Vocab, true, gpt2_weights_layout},
      {"gpt2-medium", "GPT-2 medium (350M): 24 layers, 16 heads, 1024 channels, context 1024", build_gpt2_medium,
       Shape{1024}, kGpt2Vocab, true, gpt2_weights_layout},
      {"gpt2-tiny", "GPT-2 for the CPU and tests: 4 layers, 4 heads, 256 channels, context 256", build_gpt2_tiny,
       Shape{256}, kGpt2Vocab, true, gpt2_weights_layout},
  };
  return models;
}

std::vector<std::string> model_names() {
  std::vector<std::string> n;
  for (const auto& m : registry()) n.push_back(m.name);
  return n;
}

const ModelInfo& model_info(const std::string& name) {
  for (const auto& m : registry())
    if (m.name == name) return m;
  LS_INPUT_ERROR("--model '{}' is unknown (known: {})", name, fmt::join(model_names(), ", "));
}

std::unique_ptr<Model> build_model(const std::string& name, const ModelSpec& spec, uint64_t seed) {
  for (const auto& m : registry()) {
    if (m.name != name) continue;
    const bool token_data = spec.sample_shape.rank() == 1;
    LS_CHECK_INPUT(m.tokens == token_data, "--model {} reads {}, the data holds {} of shape {}", name,
                   m.tokens ? "token sequences" : "images", token_data ? "token sequences" : "images",
                   spec.sample_shape.str());
    Sequential net;
    try {  // the sample shape comes from the data: a layer that cannot take it is bad input
      net = m.build(spec);
    } catch (const InputError&) {
      throw;
    } catch (const Error& e) {
      LS_INPUT_ERROR("--model {}: samples of shape {} are too small or do not fit ({})", name,
                     spec.sample_shape.str(), e.message());
    }
    auto model = std::make_unique<Model>(name, std::move(net), spec.sample_shape, spec.num_classes, seed);
    if (m.weights_layout) model->set_weights_layout(m.weights_layout(*model));
    return model;
  }
  LS_INPUT_ERROR("--model '{}' is unknown (known: {})", name, fmt::join(model_names(), ", "));
}

int64_t flat_features(const Sequential& net, const ModelSpec& spec) {
  const Shape in{1, spec.sample_shape[0], spec.sample_shape[1], spec.sample_shape[2]};
  if (net.size() == 0) return in.numel();
  return net.shapes(in).back().numel();
}

}  // namespace lockstep::models
