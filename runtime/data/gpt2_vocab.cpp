// GPT-2's vocabulary: the tiktoken ranks file and its base64, decoding ids to
// bytes, and encoding a prompt (pre-tokenisation, lowest-rank merges).
#include "data/gpt2_vocab.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace lockstep {
namespace {

constexpr std::string_view kEndOfTextText = "<|endoftext|>";

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with '=' padding into `out`; false on anything else.
bool base64_decode(std::string_view s, std::string& out) {
  out.clear();
  if (s.empty() || s.size() % 4 != 0) return false;
  for (size_t i = 0; i < s.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (size_t j = 0; j < 4; ++j) {
      const char c = s[i + j];
      int d = 0;
      if (c == '=') {
        if (i + 4 != s.size() || j < 2) return false;
        ++pad;
      } else if (pad || (d = sextet(c)) < 0) {
        return false;
      }
      v = v << 6 | static_cast<uint32_t>(d);
    }
    out.push_back(static_cast<char>(v >> 16));
    if (pad < 2) out.push_back(static_cast<char>(v >> 8 & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(v & 0xFF));
  }
  return true;
}

std::string shown(std::string_view s) { return s.size() > 40 ? std::string(s.substr(0, 40)) + "..." : std::string(s); }

// The character classes of GPT-2's pre-tokenisation regex.
enum class Kind { kLetter, kNumber, kSpace, kOther };

struct CodePoint {
  size_t bytes;
  Kind kind;
};

Kind classify_non_ascii(uint32_t c) {
  if (c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
      c == 0x202F || c == 0x205F || c == 0x3000)
    return Kind::kSpace;
  if (c == 0xB2 || c == 0xB3 || c == 0xB9 || (c >= 0xBC && c <= 0xBE)) return Kind::kNumber;
  if (c == 0xAA || c == 0xB5 || c == 0xBA) return Kind::kLetter;
  if (c < 0xC0 || c == 0xD7 || c == 0xF7 || (c >= 0x2010 && c <= 0x206F) || (c >= 0x20A0 && c <= 0x20CF))
    return Kind::kOther;
  return Kind::kLetter;
}

// The code point at s[i]: its length in bytes and its class (a byte that does
// not start valid UTF-8 is one byte of punctuation).
CodePoint at(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) {
    if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')) return {1, Kind::kLetter};
    if (b >= '0' && b <= '9') return {1, Kind::kNumber};
    if (b == ' ' || (b >= '\t' && b <= '\r')) return {1, Kind::kSpace};
    return {1, Kind::kOther};
  }
  const size_t n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
  if (n == 0 || i + n > s.size()) return {1, Kind::kOther};
  uint32_t c = b & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto t = static_cast<unsigned char>(s[i + k]);
    if ((t & 0xC0) != 0x80) return {1, Kind::kOther};
    c = c << 6 | (t & 0x3F);
  }
  return {n, classify_non_ascii(c)};
}

// The end of the pre-token starting at s[i], as GPT-2's regex splits.
size_t pre_token_end(std::string_view s, size_t i) {
  if (s[i] == '\'') {
    for (std::string_view c : {"s", "t", "re", "ve", "m", "ll", "d"})
      if (s.substr(i + 1).starts_with(c)) return i + 1 + c.size();
  }
  size_t j = i;
  Kind k = at(s, i).kind;
  if (s[i] == ' ' && i + 1 < s.size() && at(s, i + 1).kind != Kind::kSpace) {  // " ?" then a run
    j = i + 1;
    k = at(s, j).kind;
  }
  if (k != Kind::kSpace) {
    while (j < s.size()) {
      const CodePoint c = at(s, j);
      if (c.kind != k) break;
      j += c.bytes;
    }
    return j;
  }
  // \s+(?!\S) then \s+: a run of spaces, less its last character when more follows.
  size_t last = i;
  int count = 0;
  for (j = i; j < s.size();) {
    const CodePoint c = at(s, j);
    if (c.kind != Kind::kSpace) break;
    last = j;
    j += c.bytes;
    ++count;
  }
  return (j < s.size() && count >= 2) ? last : j;
}

}  // namespace

Gpt2Vocab::Gpt2Vocab(const std::string& ranks_path) : path_(ranks_path) {
  std::ifstream f(ranks_path, std::ios::binary);
  if (!f) LS_INPUT_ERROR("{}: cannot open ({})", ranks_path, std::strerror(errno ? errno : ENOENT));
  std::stringstream contents;
  contents << f.rdbuf();
  struct Entry {
    std::string bytes;
    int64_t rank, line;
  };
  std::vector<Entry> entries;
  std::string line, bytes;
  for (int64_t number = 1; std::getline(contents, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    const std::string_view token = std::string_view(line).substr(0, space);
    const std::string_view rank_text =
        space == std::string::npos ? std::string_view() : std::string_view(line).substr(space + 1);
    int64_t rank = -1;
    const auto [end, ec] = std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
    LS_CHECK_INPUT(space != std::string::npos && ec == std::errc() && end == rank_text.data() + rank_text.size() &&
                       rank >= 0,
                   "{}: line {} is not \"<base64 bytes> <rank>\": \"{}\"", ranks_path, number, shown(line));
    LS_CHECK_INPUT(base64_decode(token, bytes), "{}: line {}: \"{}\" is not base64", ranks_path, number,
                   shown(token));
    entries.push_back({bytes, rank, number});
  }
  LS_CHECK_INPUT(!entries.empty(), "{}: no tokens (a tiktoken ranks file has \"<base64 bytes> <rank>\" lines)",
                 ranks_path);
  // Ranks are the ids 0..n-1, each once, for n distinct byte strings.
  const auto n = static_cast<int64_t>(entries.size());
  std::vector<const Entry*> by_rank(entries.size(), nullptr);
  for (const Entry& e : entries) {
    LS_CHECK_INPUT(e.rank < n, "{}: line {}: rank {}, but the file has {} tokens (ranks 0..{}, each once)",
                   ranks_path, e.line, e.rank, n, n - 1);
    const Entry*& slot = by_rank[static_cast<size_t>(e.rank)];
    LS_CHECK_INPUT(!slot, "{}: line {}: rank {} again (first on line {})", ranks_path, e.line, e.rank,
                   slot ? slot->line : 0);
    slot = &e;
  }
  tokens_.reserve(entries.size());
  for (const Entry* e : by_rank) {
    const auto [it, fresh] = ranks_.emplace(e->bytes, static_cast<int32_t>(e->rank));
    LS_CHECK_INPUT(fresh, "{}: line {}: the same bytes as line {}", ranks_path, e->line,
                   by_rank[static_cast<size_t>(it->second)]->line);
    tokens_.push_back(e->bytes);
  }
}

std::string Gpt2Vocab::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id == end_of_text()) {
      out += kEndOfTextText;
      continue;
    }
    LS_CHECK_INPUT(id >= 0 && id < end_of_text(), "{}: token {} at position {} is outside the vocabulary of {}",
                   path_, id, i, size());
    out += tokens_[static_cast<size_t>(id)];
  }
  return out;
}

void Gpt2Vocab::merge(std::string_view piece, std::vector<int32_t>& out) const {
  if (const auto whole = ranks_.find(std::string(piece)); whole != ranks_.end()) {
    out.push_back(whole->second);
    return;
  }
  std::vector<std::string> parts;
  for (char c : piece) parts.emplace_back(1, c);
  while (parts.size() > 1) {  // join the adjacent pair of lowest rank
    int32_t best = -1;
    size_t at_pair = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const auto it = ranks_.find(parts[i] + parts[i + 1]);
      if (it != ranks_.end() && (best < 0 || it->second < best)) {
        best = it->second;
        at_pair = i;
      }
    }
    if (best < 0) break;
    parts[at_pair] += parts[at_pair + 1];
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at_pair) + 1);
  }
  for (const std::string& p : parts) {
    const auto it = ranks_.find(p);
    LS_CHECK_INPUT(it != ranks_.end(), "{}: no token for the byte 0x{:02x} (not a byte-level BPE vocabulary)",
                   path_, static_cast<unsigned char>(p[0]));
    out.push_back(it->second);
  }
}

std::vector<int32_t> Gpt2Vocab::encode(std::string_view text) const {
  std::vector<int32_t> out;
  for (size_t i = 0; i < text.size();) {
    const size_t end = pre_token_end(text, i);
    merge(text.substr(i, end - i), out);
    i = end;
  }
  return out;
}

}  // namespace lockstep
