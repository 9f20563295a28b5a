// gpt2_grads WEIGHTS BATCH OUT --vocab V --n-layer L --n-head H --n-embd C:
// one forward and backward of gpt2-tiny of those sizes, for comparison with
// another framework's. WEIGHTS is a weights file (load_weights: Hugging
// Face's names and layout); BATCH a safetensors file with "tokens" and
// "targets", I32 [B, T]. OUT gets "logits" [B, T, V] F32, "loss" (the mean
// softmax cross-entropy over the B*T positions, F64 scalar) and every
// parameter's gradient of that loss under the weights file's names and
// shapes. Exits 2 on bad input, naming it.
#include <cstdio>
#include <cstring>
#include <string>

#include "checkpoint/weights.h"
#include "nn/loss.h"
#include "registry.h"

using namespace lockstep;

namespace {

Tensor batch_tensor(const SafetensorsFile& f, const char* name) {
  const auto& e = f.entry(name);
  LS_CHECK_INPUT(e.dtype == DType::I32 && e.shape.rank() == 2, "{}: '{}' is {} {}, expected I32 [B, T]", f.path(),
                 name, dtype_name(e.dtype), e.shape.str());
  Tensor t = Tensor::zeros(e.shape, DType::I32);
  std::memcpy(t.raw_data(), e.data, e.nbytes());
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 12) {
    std::fprintf(stderr, "usage: gpt2_grads WEIGHTS BATCH OUT --vocab V --n-layer L --n-head H --n-embd C\n");
    return 2;
  }
  try {
    models::ModelSpec spec;
    for (int i = 4; i + 1 < argc; i += 2) {
      const std::string flag = argv[i];
      const int64_t v = std::stoll(argv[i + 1]);
      if (flag == "--vocab") spec.num_classes = v;
      else if (flag == "--n-layer") spec.n_layer = v;
      else if (flag == "--n-head") spec.n_head = v;
      else if (flag == "--n-embd") spec.n_embd = v;
      else LS_INPUT_ERROR("unknown flag {}", flag);
    }
    const SafetensorsFile batch = SafetensorsFile::read(argv[2]);
    const Tensor tokens = batch_tensor(batch, "tokens"), targets = batch_tensor(batch, "targets");
    LS_CHECK_INPUT(tokens.shape() == targets.shape(), "{}: tokens {} and targets {} differ in shape", argv[2],
                   tokens.shape().str(), targets.shape().str());
    spec.sample_shape = Shape{tokens.size(1)};
    auto model = models::build_model("gpt2-tiny", spec, 1);
    load_weights(argv[1], *model);

    Sequential& net = model->net();
    const Tensor& logits = net.forward(tokens, ForwardContext{});
    const LossStats stats = softmax_cross_entropy(logits, targets);
    Tensor dlogits = net.output_grad();
    softmax_cross_entropy_backward(logits, targets, 1.f / static_cast<float>(tokens.numel()), dlogits);
    net.backward(BackwardContext{});

    WeightsTensors out = weights_tensors(*model, /*gradients=*/true);
    const double loss = stats.loss_sum / static_cast<double>(stats.count);
    out.entries.push_back({"logits", DType::F32, logits.shape(), logits.raw_data()});
    out.entries.push_back({"loss", DType::F64, Shape{}, &loss});
    write_safetensors(argv[3], out.entries);
    std::printf("loss %.9f over %lld positions\n", loss, static_cast<long long>(stats.count));
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "gpt2_grads: %s\n", e.message().c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt2_grads: %s\n", e.what());
    return 1;
  }
}
