// safetensors writer and validating reader (nlohmann::json for the header).
#include "checkpoint/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "checkpoint/atomic_file.h"

namespace lockstep {
namespace {
// Headers larger than this are refused before reading them (the reference
// implementation uses the same 100 MB limit).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

void put_u64_le(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
// A header value quoted in an error message: one short line, and never a
// dump of nested values (a hostile header can nest arrays a million deep, and
// dump() recurses once per level).
std::string excerpt(const nlohmann::json& j) {
  if (j.is_structured())
    for (const auto& e : j)
      if (e.is_structured()) return j.is_array() ? "[nested arrays]" : "{nested objects}";
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 72) + "...(cut)";
  return s;
}
uint64_t get_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}
}  // namespace

void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& e : entries) {
    LS_CHECK(!e.name.empty() && e.name != "__metadata__", "invalid tensor name '{}'", e.name);
    LS_CHECK(!header.contains(e.name), "tensor {} written twice", e.name);
    std::vector<int64_t> shape(e.shape.dims().begin(), e.shape.dims().end());
    header[e.name] = {{"dtype", std::string(dtype_name(e.dtype))},
                      {"shape", shape},
                      {"data_offsets", {offset, offset + e.nbytes()}}};
    offset += e.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  write_file_atomically(path, [&](std::FILE* f) {
    uint8_t len[8];
    put_u64_le(len, text.size());
    bool ok = std::fwrite(len, 1, 8, f) == 8 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
    for (const auto& e : entries)
      ok = ok && (e.nbytes() == 0 || std::fwrite(e.data, 1, e.nbytes(), f) == e.nbytes());
    LS_CHECK_INPUT(ok, "{}: write failed ({})", path, std::strerror(errno));
  });
}

SafetensorsFile SafetensorsFile::read(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  LS_CHECK_INPUT(fs::exists(path, ec), "{}: no such file", path);
  LS_CHECK_INPUT(fs::is_regular_file(path, ec), "{}: not a regular file", path);
  SafetensorsFile st;
  st.path_ = path;
  {
    std::ifstream in(path, std::ios::binary);
    LS_CHECK_INPUT(in.good(), "{}: cannot open", path);
    const auto size = fs::file_size(path, ec);
    LS_CHECK_INPUT(!ec, "{}: cannot stat", path);
    st.bytes_.resize(size);
    in.read(reinterpret_cast<char*>(st.bytes_.data()), static_cast<std::streamsize>(size));
    LS_CHECK_INPUT(static_cast<uint64_t>(in.gcount()) == size, "{}: read failed", path);
  }
  const uint64_t size = st.bytes_.size();
  LS_CHECK_INPUT(size >= 8, "{}: not a safetensors file ({} bytes, shorter than the 8-byte header length)", path, size);
  const uint64_t hlen = get_u64_le(st.bytes_.data());
  LS_CHECK_INPUT(hlen <= kMaxHeaderBytes, "{}: header length {} is larger than the {} byte limit", path, hlen,
                 kMaxHeaderBytes);
  LS_CHECK_INPUT(hlen <= size - 8, "{}: header length {} runs past the end of the file ({} bytes)", path, hlen, size);
  const char* hbegin = reinterpret_cast<const char*>(st.bytes_.data() + 8);
  nlohmann::json header = nlohmann::json::parse(hbegin, hbegin + hlen, nullptr, /*allow_exceptions=*/false);
  LS_CHECK_INPUT(!header.is_discarded() && header.is_object(), "{}: header is not a JSON object", path);
  const uint64_t data_size = size - 8 - hlen;
  const uint8_t* data = st.bytes_.data() + 8 + hlen;

  struct Span {
    uint64_t b, e;
    size_t entry;
  };
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      LS_CHECK_INPUT(v.is_object(), "{}: __metadata__ is not an object", path);
      for (auto m = v.begin(); m != v.end(); ++m) {
        LS_CHECK_INPUT(m.value().is_string(), "{}: metadata value of '{}' is not a string", path, m.key());
        st.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    LS_CHECK_INPUT(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"),
                   "{}: tensor '{}' lacks dtype, shape or data_offsets", path, name);
    LS_CHECK_INPUT(v["dtype"].is_string(), "{}: tensor '{}' has a non-string dtype", path, name);
    // BOOL (one byte, 0 or 1) reads as U8: Hugging Face's GPT-2 files hold their causal masks so.
    const std::string dtype_str = v["dtype"].get<std::string>();
    const auto dtype = dtype_str == "BOOL" ? std::optional(DType::U8) : dtype_from_name(dtype_str);
    LS_CHECK_INPUT(dtype.has_value(), "{}: tensor '{}' has unsupported dtype {}", path, name, excerpt(v["dtype"]));
    const auto& js = v["shape"];
    LS_CHECK_INPUT(js.is_array() && js.size() <= static_cast<size_t>(Shape::kMaxDims),
                   "{}: tensor '{}' has an invalid shape {}", path, name, excerpt(js));
    std::vector<int64_t> dims;
    uint64_t numel = 1;
    for (const auto& d : js) {
      LS_CHECK_INPUT(d.is_number_unsigned(), "{}: tensor '{}' has an invalid shape {}", path, name, excerpt(js));
      const uint64_t n = d.get<uint64_t>();
      // After a 0 extent the size check below passes anything; extents are int64.
      LS_CHECK_INPUT(n <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                     "{}: tensor '{}' has an invalid shape {}", path, name, excerpt(js));
      LS_CHECK_INPUT(n == 0 || numel <= data_size / n, "{}: tensor '{}' shape {} is larger than the file", path, name,
                     excerpt(js));
      numel *= n;
      dims.push_back(static_cast<int64_t>(n));
    }
    const auto& off = v["data_offsets"];
    LS_CHECK_INPUT(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(),
                   "{}: tensor '{}' has invalid data_offsets {}", path, name, excerpt(off));
    const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    LS_CHECK_INPUT(b <= e && e <= data_size, "{}: tensor '{}' data_offsets [{}, {}] outside the {} data bytes", path,
                   name, b, e, data_size);
    LS_CHECK_INPUT(e - b == numel * size_of(*dtype),
                   "{}: tensor '{}' is {} {} but data_offsets span {} bytes", path, name, excerpt(js),
                   dtype_name(*dtype), e - b);
    spans.push_back({b, e, st.entries_.size()});
    st.entries_.push_back({name, *dtype, Shape(std::span<const int64_t>(dims)), data + b});
  }
  // The data must be covered exactly, in order, with no overlaps or holes.
  std::sort(spans.begin(), spans.end(), [](const Span& x, const Span& y) { return x.b < y.b || (x.b == y.b && x.e < y.e); });
  uint64_t expect = 0;
  for (const Span& s : spans) {
    LS_CHECK_INPUT(s.b == expect, "{}: tensor '{}' data at byte {} {} the previous tensor's end {}", path,
                   st.entries_[s.entry].name, s.b, s.b < expect ? "overlaps" : "leaves a hole after", expect);
    expect = s.e;
  }
  LS_CHECK_INPUT(expect == data_size, "{}: {} data bytes but tensors cover {}", path, data_size, expect);
  std::vector<SafetensorsEntry> ordered;
  for (const Span& s : spans) ordered.push_back(st.entries_[s.entry]);
  st.entries_ = std::move(ordered);
  for (size_t i = 0; i < st.entries_.size(); ++i) st.index_[st.entries_[i].name] = i;
  return st;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> n;
  for (const auto& e : entries_) n.push_back(e.name);
  return n;
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = index_.find(name);
  LS_CHECK_INPUT(it != index_.end(), "{}: no tensor named '{}'", path_, name);
  return entries_[it->second];
}

}  // namespace lockstep
