// safetensors files (Hugging Face's format): 8 bytes of little-endian header length, a JSON
// header naming each tensor's dtype, shape and byte range in the data, then the data. The
// reader treats the file as untrusted: the header is bounded in size and nesting, every tensor
// needs a known dtype, a shape whose elements times the element size equal its byte range,
// and the ranges must cover the data exactly, in order, without holes or overlaps.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tt {

struct SafetensorInfo {
  std::string name, dtype;  // dtype: F32, BF16, F16, or U8 (bytes: a checkpoint's tokenizer files)
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // bytes into the data
  int64_t numel() const;
};

struct SafetensorsFile {
  std::string path;
  std::map<std::string, std::string> metadata;
  std::vector<SafetensorInfo> tensors;  // in the order of their data
  uint64_t data_start = 0;
  const SafetensorInfo* find(const std::string& name) const;
};

// UsageError naming `flag`, the file and the rule it breaks.
SafetensorsFile read_safetensors(const std::string& path, const std::string& flag);
// A tensor's values as fp32 (bf16 and fp16 widened exactly); UsageError for U8.
std::vector<float> read_tensor_f32(const SafetensorsFile& file, const SafetensorInfo& t);
// A tensor's bytes as they are in the file.
std::string read_tensor_bytes(const SafetensorsFile& file, const SafetensorInfo& t);

struct TensorOut {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};
// Writes the tensors in the order given, as F32 or (bf16 = true) BF16 rounded to nearest even,
// with `metadata`, whole or not at all.
void write_safetensors(const std::string& path, const std::vector<TensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata, bool bf16);

}  // namespace tt
