// Model weights as safetensors: one F32 tensor per parameter and buffer (batch
// norm running statistics), named as in PyTorch's nn.Sequential
// ("layers.0.weight"), shapes in PyTorch's convention, so torch / safetensors
// load them into the equivalent PyTorch module. A model with a weights layout
// (checkpoint/weights_layout.h; GPT-2's are Hugging Face's names) is written
// and read in that layout's names and shapes instead.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "nn/model.h"

namespace lockstep {

// `metadata` is stored next to the model name (e.g. the input normalisation)
// and the CRC-32 checksums of checksums.h.
void save_weights(const std::string& path, const Model& model, std::map<std::string, std::string> metadata = {});
// Every parameter must be present with its exact shape and dtype F32, and the
// file may hold nothing else (but what the layout ignores), and checksums,
// when the file has them, must match; otherwise an InputError names the file
// and the tensor, and the model is left unchanged.
void load_weights(const std::string& path, Model& model);

// The tensors a weights file holds for `model`, in its names and shapes: of
// the values, or with `gradients` of the parameters' gradients (for tools
// comparing them with another framework's; buffers are then left out).
struct WeightsTensors {
  std::vector<SafetensorsEntry> entries;
  std::vector<Tensor> storage;  // the host memory the entries point into
};
WeightsTensors weights_tensors(const Model& model, bool gradients = false);

}  // namespace lockstep
