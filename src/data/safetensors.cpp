#include "data/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"
#include "core/files.h"
#include "core/json_input.h"

namespace tt {

using json = nlohmann::json;

namespace {

constexpr uint64_t kMaxHeaderBytes = 16u << 20;  // a header of 16 MB names over 100,000 tensors
constexpr int kMaxDepth = 8;                     // the format nests three deep

int dtype_bytes(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "BF16" || dtype == "F16") return 2;
  if (dtype == "U8") return 1;
  return 0;
}

float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (frac == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      uint32_t f = frac;
      do { ++e, f <<= 1; } while (!(f & 0x400));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (f & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | frac << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | frac << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

int64_t SafetensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const SafetensorInfo* SafetensorsFile::find(const std::string& name) const {
  for (const SafetensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

SafetensorsFile read_safetensors(const std::string& path, const std::string& flag) {
  auto bad = [&](const std::string& what) -> void { usage_fail(flag + ": '" + path + "' " + what); };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) bad("is not a file");
  const uint64_t size = uint64_t(st.st_size);
  std::ifstream in(path, std::ios::binary);
  uint8_t len[8];
  if (size < 8 || !in.read(reinterpret_cast<char*>(len), 8)) bad("is too short for a safetensors file");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | len[i];
  if (n < 2 || n > kMaxHeaderBytes || n > size - 8) bad("has a header length out of range (" + std::to_string(n) + ")");
  std::string text(n, '\0');
  if (!in.read(text.data(), std::streamsize(n))) bad("is truncated inside its header");
  const json header = parse_json_input(text, flag + ": '" + path + "' has a header that", kMaxDepth);
  if (!header.is_object()) bad("has a header that is not a JSON object");
  SafetensorsFile f;
  f.path = path;
  f.data_start = 8 + n;
  const uint64_t data = size - f.data_start;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const json& v = it.value();
    if (it.key() == "__metadata__") {
      if (!v.is_object()) bad("has __metadata__ that is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) bad("has metadata '" + m.key() + "' that is not a string");
        f.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    SafetensorInfo t;
    t.name = it.key();
    const std::string where = "tensor '" + t.name + "'";
    if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() || !v.contains("shape") ||
        !v["shape"].is_array() || !v.contains("data_offsets") || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2)
      bad("has " + where + " without a string dtype, an array shape and two data_offsets");
    t.dtype = v["dtype"].get<std::string>();
    if (!dtype_bytes(t.dtype)) bad("has " + where + " of dtype " + t.dtype + " (this build reads F32, BF16, F16, U8)");
    int64_t numel = 1;
    for (const json& d : v["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t(1) << 40)) bad("has " + where + " with a bad dimension");
      numel *= int64_t(d.get<uint64_t>());
      if (numel > (int64_t(1) << 40)) bad("has " + where + " with too many elements");
      t.shape.push_back(int64_t(d.get<uint64_t>()));
    }
    for (const json& o : v["data_offsets"])
      if (!o.is_number_unsigned()) bad("has " + where + " with data offsets that are not byte counts");
    t.begin = v["data_offsets"][0].get<uint64_t>();
    t.end = v["data_offsets"][1].get<uint64_t>();
    if (t.begin > t.end || t.end > data) bad("has " + where + " whose bytes lie outside the file");
    if (t.end - t.begin != uint64_t(numel) * uint64_t(dtype_bytes(t.dtype)))
      bad("has " + where + " whose byte length is not its shape's elements times its element size");
    f.tensors.push_back(t);
  }
  std::sort(f.tensors.begin(), f.tensors.end(), [](const SafetensorInfo& a, const SafetensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  for (const SafetensorInfo& t : f.tensors) {
    if (t.begin != at) bad("has tensors that leave a hole or overlap at byte " + std::to_string(at) + " ('" + t.name + "')");
    at = t.end;
  }
  if (at != data) bad("has " + std::to_string(data - at) + " bytes of data that no tensor covers (or is truncated)");
  return f;
}

std::string read_tensor_bytes(const SafetensorsFile& file, const SafetensorInfo& t) {
  std::ifstream in(file.path, std::ios::binary);
  std::string raw(t.end - t.begin, '\0');
  in.seekg(std::streamoff(file.data_start + t.begin));
  if (!in.read(raw.data(), std::streamsize(raw.size()))) usage_fail("'" + file.path + "': cannot read tensor '" + t.name + "'");
  return raw;
}

std::vector<float> read_tensor_f32(const SafetensorsFile& file, const SafetensorInfo& t) {
  if (t.dtype == "U8")
    usage_fail("'" + file.path + "': tensor '" + t.name + "' holds bytes (U8), not numbers of F32, BF16 or F16");
  const std::string raw = read_tensor_bytes(file, t);
  std::vector<float> out(size_t(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.dtype == "F32") {
      std::memcpy(&out[i], raw.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, raw.data() + 2 * i, 2);
      out[i] = t.dtype == "BF16" ? bf16_to_float(bf16{h}) : f16_to_float(h);
    }
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<TensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata, bool bf16_out) {
  const uint64_t width = bf16_out ? 2 : 4;
  json header;
  header["__metadata__"] = metadata;
  uint64_t at = 0;
  for (const TensorOut& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    TT_CHECK(n == int64_t(t.values.size()), "write_safetensors: shape and values of '" + t.name + "' disagree");
    header[t.name] = {{"dtype", bf16_out ? "BF16" : "F32"}, {"shape", t.shape}, {"data_offsets", {at, at + uint64_t(n) * width}}};
    at += uint64_t(n) * width;
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');  // the data starts 8-byte aligned
  write_file_atomic(path, [&](std::ostream& out) {
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), std::streamsize(text.size()));
    for (const TensorOut& t : tensors) {
      if (!bf16_out) {
        out.write(reinterpret_cast<const char*>(t.values.data()), std::streamsize(t.values.size() * 4));
        continue;
      }
      std::vector<bf16> b(t.values.size());
      std::transform(t.values.begin(), t.values.end(), b.begin(), float_to_bf16);
      out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size() * 2));
    }
  });
}

}  // namespace tt
