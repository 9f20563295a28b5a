// CRC-32 checksums that lockstep's writers (checkpoints, --save-weights) store
// in a safetensors file's metadata:
//   "tensor_crc32"   "name=xxxxxxxx;name=xxxxxxxx;..." one per tensor, in data order
//   "metadata_crc32" over every other metadata key and value, in key order
// so a bit flipped anywhere in the file is found on load.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"

namespace lockstep {

// Adds both keys to `meta` (after every other key is in it).
void add_checksums(const std::vector<SafetensorsEntry>& entries, std::map<std::string, std::string>& meta);

// Checks both against `f`; InputError naming the file on any mismatch. With
// `required` false, a file that carries neither key (written by another tool)
// passes unchecked; one that carries either must carry both.
void verify_checksums(const SafetensorsFile& f, bool required);

}  // namespace lockstep
