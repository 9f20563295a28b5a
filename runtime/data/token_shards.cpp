// llm.c token shards: finding, validating, reading and writing them, and the
// (T + 1)-token windows over them.
#include "data/token_shards.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "core/input_subject.h"

namespace lockstep {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

}  // namespace

std::vector<std::string> find_token_shards(const std::string& dir, const std::string& split) {
  namespace fs = std::filesystem;
  LS_CHECK_INPUT_ON(fs::is_directory(dir), subject::kDataDirectory, " {}: not a directory", dir);
  std::vector<std::string> found;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.size() > 4 && name.ends_with(".bin") && name.find(split) != std::string::npos)
      found.push_back(e.path().string());
  }
  std::sort(found.begin(), found.end());
  LS_CHECK_INPUT_ON(!found.empty(), subject::kDataDirectory,
                    " {}: no token shards for the {} split (files named *{}*.bin in llm.c's format)", dir, split,
                    split);
  return found;
}

std::vector<uint16_t> read_token_shard(const std::string& path, int64_t vocab_size) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto bytes = static_cast<int64_t>(fs::file_size(path, ec));
  LS_CHECK_INPUT(!ec, "{}: cannot read its size ({})", path, ec.message());
  const int64_t header_bytes = kTokenShardHeaderInts * 4;
  LS_CHECK_INPUT(bytes >= header_bytes, "{}: {} bytes, shorter than a token shard's {}-byte header", path, bytes,
                 header_bytes);
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) LS_INPUT_ERROR("{}: cannot open ({})", path, std::strerror(errno ? errno : ENOENT));
  int32_t header[kTokenShardHeaderInts];
  LS_CHECK_INPUT(std::fread(header, 4, kTokenShardHeaderInts, f.get()) == kTokenShardHeaderInts,
                 "{}: cannot read the header", path);
  LS_CHECK_INPUT(header[0] == kTokenShardMagic, "{}: not a token shard (magic {}, expected {})", path, header[0],
                 kTokenShardMagic);
  LS_CHECK_INPUT(header[1] == kTokenShardVersion, "{}: token shard version {} (this reader knows version {})", path,
                 header[1], kTokenShardVersion);
  const int64_t count = header[2];
  const int64_t present = (bytes - header_bytes) / 2;
  LS_CHECK_INPUT(count >= 0, "{}: negative token count {}", path, count);
  LS_CHECK_INPUT(count <= present, "{}: the header counts {} tokens, the file holds {} (truncated)", path, count,
                 present);
  LS_CHECK_INPUT(bytes == header_bytes + 2 * count, "{}: {} bytes after the {} tokens the header counts", path,
                 bytes - header_bytes - 2 * count, count);
  std::vector<uint16_t> tokens(static_cast<size_t>(count));
  LS_CHECK_INPUT(std::fread(tokens.data(), 2, tokens.size(), f.get()) == tokens.size(), "{}: cannot read {} tokens",
                 path, count);
  for (size_t i = 0; i < tokens.size(); ++i)
    LS_CHECK_INPUT(tokens[i] < vocab_size, "{}: token {} at position {} is outside the vocabulary of {}", path,
                   tokens[i], i, vocab_size);
  return tokens;
}

void write_token_shard(const std::string& path, std::span<const uint16_t> tokens) {
  File f(std::fopen(path.c_str(), "wb"));
  if (!f) LS_THROW("{}: cannot create ({})", path, std::strerror(errno));
  int32_t header[kTokenShardHeaderInts] = {};
  header[0] = kTokenShardMagic;
  header[1] = kTokenShardVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  LS_CHECK(std::fwrite(header, 4, kTokenShardHeaderInts, f.get()) == kTokenShardHeaderInts &&
               std::fwrite(tokens.data(), 2, tokens.size(), f.get()) == tokens.size(),
           "{}: write failed ({})", path, std::strerror(errno));
}

TokenWindows::TokenWindows(std::vector<std::vector<uint16_t>> shards, int64_t seq_len)
    : shards_(std::move(shards)), seq_len_(seq_len) {
  LS_CHECK(seq_len >= 1, "TokenWindows: sequence length {} must be at least 1", seq_len);
  starts_.push_back(0);
  for (const auto& s : shards_) {
    const auto n = static_cast<int64_t>(s.size());
    starts_.push_back(starts_.back() + (n > seq_len ? (n - 1) / seq_len : 0));
  }
}

int64_t TokenWindows::tokens() const {
  int64_t n = 0;
  for (const auto& s : shards_) n += static_cast<int64_t>(s.size());
  return n;
}

void TokenWindows::window(int64_t i, int32_t* inputs, int32_t* targets) const {
  LS_CHECK(i >= 0 && i < size(), "TokenWindows: window {} of {}", i, size());
  const auto s = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), i) - starts_.begin() - 1);
  const uint16_t* t = shards_[s].data() + (i - starts_[s]) * seq_len_;
  for (int64_t j = 0; j < seq_len_; ++j) {
    inputs[j] = t[j];
    targets[j] = t[j + 1];
  }
}

}  // namespace lockstep
