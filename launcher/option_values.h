// Option text to numbers, with errors naming the flag (options.cpp): shared
// by the files that declare and convert trainer options.
#pragma once

#include <cstdint>
#include <string>

namespace cxxopts {
class Options;
class ParseResult;
}  // namespace cxxopts

namespace lockstep {

struct TrainConfig;

int64_t to_int(const std::string& flag, const std::string& text);     // "--flag: 'x' is not an integer"
float to_float(const std::string& flag, const std::string& text);     // also refuses inf and nan

// The language-model options (sequence_options.cpp): --vocab-size, --seq-len,
// the GPT-2 sizes, Adam's betas and eps, --warmup-steps, --min-lr,
// --sample-tokens, --prompt, --vocab-file. Declared into `o`'s groups ("model
// and data", "optimisation", "outputs"), converted after the rest of `c`
// (c.model is known: --seq-len 0 becomes its context).
void add_sequence_options(cxxopts::Options& o, const TrainConfig& defaults);
void convert_sequence_options(const cxxopts::ParseResult& r, TrainConfig& c);

// The "checkpoints" group (checkpoint_options.cpp): --checkpoint-dir,
// --checkpoint-every, --keep-checkpoints, --resume, --checkpoint-write,
// --checkpoint-failure.
void add_checkpoint_options(cxxopts::Options& o, const TrainConfig& defaults);
void convert_checkpoint_options(const cxxopts::ParseResult& r, TrainConfig& c);

}  // namespace lockstep
