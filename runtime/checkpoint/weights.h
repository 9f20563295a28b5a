// Model weights as safetensors: one F32 tensor per parameter and buffer (batch
// norm running statistics), named as in
// PyTorch's nn.Sequential ("layers.0.weight"), shapes in PyTorch's convention,
// so torch / safetensors load them into the equivalent PyTorch module.
#pragma once

#include <map>
#include <string>

#include "nn/model.h"

namespace lockstep {

// `metadata` is stored next to the model name (e.g. the input normalisation)
// and the CRC-32 checksums of checksums.h.
void save_weights(const std::string& path, const Model& model, std::map<std::string, std::string> metadata = {});
// Every parameter must be present with its exact shape and dtype F32, and the
// file may hold nothing else, and checksums, when the file has them, must
// match; otherwise an InputError names the difference and the model is left
// unchanged.
void load_weights(const std::string& path, Model& model);

}  // namespace lockstep
