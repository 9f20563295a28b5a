// WeightsLayout: how a weights file holds a model's state when it follows
// another program's convention instead of lockstep's layer names (GPT-2 as
// Hugging Face's GPT2LMHeadModel names it). One file tensor per state tensor:
// its name, and how its elements map onto the parameter's; plus the names a
// file may hold that the model does not read. A model carries its layout
// (Model::set_weights_layout); save_weights and load_weights follow it.
// Checkpoints never do: they keep the internal names.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "tensor/shape.h"

namespace lockstep {

struct WeightsLayout {
  enum class Map {
    Same,         // the file tensor is the parameter as it is
    Transpose,    // a [R, C] parameter is stored as [C, R]
    LeadingRows,  // the file holds the first `rows` rows; loading zeroes the rest
  };
  struct FileTensor {
    std::string name;
    Map map = Map::Same;
    int64_t rows = 0;  // LeadingRows only
  };

  // By state (internal) name; every state tensor has one.
  std::map<std::string, FileTensor> tensors;
  // A prefix of file names that a file may leave out ("transformer.": files
  // of the bare transformer, without the language-model head, do).
  std::string optional_prefix;
  // File names that loading accepts and does not read (buffers the model
  // computes itself, such as causal masks); any dtype and shape.
  std::set<std::string> ignored;
  // File name -> the file name whose tensor it must equal (a tied copy:
  // loading checks it is bitwise the same and reads only the original).
  std::map<std::string, std::string> copies;

  // The shape of the file tensor `t` for a state tensor of `shape`.
  static Shape file_shape(const FileTensor& t, const Shape& shape);
};

}  // namespace lockstep
