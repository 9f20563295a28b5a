// gpt2_tokens RANKS encode|decode: Gpt2Vocab (data/gpt2_vocab.h) on stdin, for
// the script tests that compare it with scripts/data/gpt2_bpe.py. encode: texts
// separated by NUL bytes in, one line of space-separated ids per text out.
// decode: one line of ids per text in, the texts each followed by a NUL out.
// Exits 2 with one line on bad input.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "core/error.h"
#include "data/gpt2_vocab.h"

using namespace lockstep;

int main(int argc, char** argv) {
  const std::string mode = argc == 3 ? argv[2] : "";
  if (mode != "encode" && mode != "decode") {
    std::fprintf(stderr, "usage: gpt2_tokens RANKS encode|decode < input\n");
    return 2;
  }
  try {
    const Gpt2Vocab vocab(argv[1]);
    std::string text, line;
    if (mode == "encode") {
      const std::string all((std::istreambuf_iterator<char>(std::cin)), {});
      std::istringstream in(all);
      while (std::getline(in, text, '\0')) {
        std::string ids;
        for (int32_t id : vocab.encode(text)) ids += (ids.empty() ? "" : " ") + std::to_string(id);
        std::cout << ids << '\n';
      }
    } else {
      while (std::getline(std::cin, line)) {
        std::vector<int32_t> ids;
        std::istringstream in(line);
        for (int64_t id; in >> id;) ids.push_back(static_cast<int32_t>(id));
        std::cout << vocab.decode(ids) << '\0';
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "gpt2_tokens: %s\n", e.message().c_str());
    return 2;
  }
  return 0;
}
