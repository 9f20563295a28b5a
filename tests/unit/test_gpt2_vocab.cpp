// data/gpt2_vocab.h on hand-written ranks files: decoding, <|endoftext|>, the
// lowest-rank merge order, pre-tokenisation, and damaged files and ids as
// input errors naming the file. (GPT-2's real ranks: tests/data/gpt2_bpe_test.py.)
#include <catch2/catch.hpp>

#include <fstream>

#include "core/error.h"
#include "data/gpt2_vocab.h"
#include "temp_dir.h"

using namespace lockstep;
using lockstep::testing::TempDir;

namespace {

// H i ! Hi " Hi" " " a b c bc ab, ranks 0..10.
constexpr const char* kRanks =
    "SA== 0\naQ== 1\nIQ== 2\nSGk= 3\nIEhp 4\nIA== 5\nYQ== 6\nYg== 7\nYw== 8\nYmM= 9\nYWI= 10\n";

std::string write(const TempDir& d, const std::string& text) {
  const std::string p = d.file("ranks.tiktoken");
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
  return p;
}

std::string load_error(const std::string& path) {
  try {
    Gpt2Vocab v(path);
  } catch (const InputError& e) {
    return e.message();
  }
  return "";
}

}  // namespace

TEST_CASE("gpt2 vocab: ids decode to their bytes, the id after the ranks to <|endoftext|>", "[gpt2]") {
  TempDir d;
  const Gpt2Vocab v(write(d, kRanks));
  CHECK(v.size() == 12);
  CHECK(v.end_of_text() == 11);
  const std::vector<int32_t> ids{3, 4, 2, 11, 0, 1};
  CHECK(v.decode(ids) == "Hi Hi!<|endoftext|>Hi");
  CHECK(v.decode(std::vector<int32_t>{}).empty());
  CHECK(v.encode("Hi Hi!") == std::vector<int32_t>{3, 4, 2});
  CHECK(v.decode(v.encode("Hi Hi!")) == "Hi Hi!");
}

TEST_CASE("gpt2 vocab: the adjacent pair of lowest rank merges first, not the leftmost", "[gpt2]") {
  TempDir d;
  const Gpt2Vocab v(write(d, kRanks));
  CHECK(v.encode("abc") == std::vector<int32_t>{6, 9});  // bc (9) before ab (10)
  CHECK(v.encode("ab") == std::vector<int32_t>{10});
}

TEST_CASE("gpt2 vocab: pre-tokenisation as GPT-2's regex on ASCII", "[gpt2]") {
  TempDir d;
  const Gpt2Vocab v(write(d, kRanks));
  // "Hi", " ", " Hi": a run of spaces gives its last one to the word after it.
  CHECK(v.encode("Hi  Hi") == std::vector<int32_t>{3, 5, 4});
  // Trailing spaces stay together; "!" is punctuation apart from the letters.
  CHECK(v.encode("Hi!  ") == std::vector<int32_t>{3, 2, 5, 5});
  // One letter run is one pre-token, merged as a whole: Hi (3) first, then bc (9).
  CHECK(v.encode("Hibc") == std::vector<int32_t>{3, 9});
  try {
    v.encode("Hz");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.message() == d.file("ranks.tiktoken") + ": no token for the byte 0x7a (not a byte-level BPE vocabulary)");
  }
}

TEST_CASE("gpt2 vocab: an id outside the vocabulary is an input error naming the file", "[gpt2]") {
  TempDir d;
  const std::string p = write(d, kRanks);
  const Gpt2Vocab v(p);
  for (int32_t bad : {12, -1, 50256}) {
    const std::vector<int32_t> ids{3, bad};
    try {
      v.decode(ids);
      FAIL("no error for " << bad);
    } catch (const InputError& e) {
      CHECK(e.message() == p + ": token " + std::to_string(bad) + " at position 1 is outside the vocabulary of 12");
    }
  }
}

TEST_CASE("gpt2 vocab: damaged ranks files are input errors naming the file and line", "[gpt2]") {
  TempDir d;
  const struct {
    std::string text, message;
  } cases[] = {
      {"SA== 0\nS=A= 1\n", ": line 2: \"S=A=\" is not base64"},
      {"SA== 0\nS*== 1\n", ": line 2: \"S*==\" is not base64"},
      {"SA== 0\nSGk 1\n", ": line 2: \"SGk\" is not base64"},
      {"SA==0\n", ": line 1 is not \"<base64 bytes> <rank>\": \"SA==0\""},
      {"SA== x\n", ": line 1 is not \"<base64 bytes> <rank>\": \"SA== x\""},
      {"SA== 0\n\naQ== -1\n", ": line 3 is not \"<base64 bytes> <rank>\": \"aQ== -1\""},
      {"SA== 0\naQ== 0\n", ": line 2: rank 0 again (first on line 1)"},
      {"SA== 0\naQ== 5\n", ": line 2: rank 5, but the file has 2 tokens (ranks 0..1, each once)"},
      {"SA== 0\nSA== 1\n", ": line 2: the same bytes as line 1"},
      {"\n\n", ": no tokens (a tiktoken ranks file has \"<base64 bytes> <rank>\" lines)"},
  };
  for (const auto& c : cases) {
    const std::string p = write(d, c.text);
    CHECK(load_error(p) == p + c.message);
  }
  const std::string missing = d.file("missing.tiktoken");
  CHECK(load_error(missing) == missing + ": cannot open (No such file or directory)");
  // Windows line ends and a missing final newline are fine.
  CHECK(Gpt2Vocab(write(d, "SA== 0\r\naQ== 1")).decode(std::vector<int32_t>{0, 1, 2}) == "Hi<|endoftext|>");
}
