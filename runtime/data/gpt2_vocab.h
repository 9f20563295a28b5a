// GPT-2's byte-level BPE vocabulary, from a tiktoken ranks file (gpt2.tiktoken,
// as scripts/data/prepare_austen.sh writes it): one "<base64 bytes> <rank>"
// line per token, the rank being the token id, ranks exactly 0..n-1 (n = 50256
// for GPT-2). Id n is <|endoftext|>, so size() is n + 1 (50257).
//
// decode() turns ids back into the bytes they stand for (UTF-8 once a whole
// text is decoded; a single token may hold part of a character). encode()
// turns a prompt into ids: each pre-token's bytes are merged by lowest rank as
// tiktoken merges them. The pre-tokenisation follows GPT-2's regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// exactly on ASCII text; outside ASCII it classes code points roughly
// (Latin-1 and General Punctuation symbols as punctuation, Unicode spaces as
// spaces, everything else as letters), where Python's `regex` uses the
// Unicode tables, so ids may differ there. "<|endoftext|>" in a prompt is
// ordinary text. A malformed ranks file or an id outside the vocabulary is an
// InputError naming the file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lockstep {

class Gpt2Vocab {
 public:
  explicit Gpt2Vocab(const std::string& ranks_path);

  int64_t size() const { return static_cast<int64_t>(tokens_.size()) + 1; }  // ranks and <|endoftext|>
  int32_t end_of_text() const { return static_cast<int32_t>(tokens_.size()); }  // 50256 for GPT-2
  std::string decode(std::span<const int32_t> ids) const;
  std::vector<int32_t> encode(std::string_view text) const;
  const std::string& path() const { return path_; }

 private:
  void merge(std::string_view piece, std::vector<int32_t>& out) const;

  std::string path_;
  std::vector<std::string> tokens_;                 // id -> bytes
  std::unordered_map<std::string, int32_t> ranks_;  // bytes -> id
};

}  // namespace lockstep
