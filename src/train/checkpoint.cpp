#include "train/checkpoint.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "model/params.h"

namespace tt {

using json = nlohmann::json;

namespace {

constexpr const char* kFormat = "tiny_llama";
constexpr const char* kFormatVersion = "1";
constexpr uint64_t kMaxHeader = 100u << 20;

// Every tensor a checkpoint of this config holds: (name, entry), in file order.
struct Expected {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel;
  int which;       // 0 parameters, 1 exp_avg, 2 exp_avg_sq
  int64_t offset;  // into the flat buffer
};

std::vector<Expected> expected_tensors(const ModelConfig& c) {
  static const char* prefix[3] = {"", "optimizer.exp_avg.", "optimizer.exp_avg_sq."};
  std::vector<Expected> out;
  for (int which = 0; which < 3; ++which)
    for (const ParamEntry& e : param_table(c))
      out.push_back({prefix[which] + e.name, e.shape, e.numel, which, e.offset});
  return out;
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  usage_fail("--resume: '" + path + "' is not a usable checkpoint: " + what);
}

int64_t parse_int(const json& meta, const char* key, const std::string& path) {
  if (!meta.contains(key) || !meta[key].is_string()) bad(path, std::string("no '") + key + "' in its metadata");
  const std::string s = meta[key].get<std::string>();
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (...) {
    used = 0;
  }
  if (used != s.size() || s.empty() || v < 0) bad(path, std::string("metadata '") + key + "' is not a count");
  return v;
}

struct Header {
  json tensors;
  CheckpointInfo info;
  uint64_t data_start = 0;
};

Header read_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) usage_fail("--resume: cannot read '" + path + "'");
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) usage_fail("--resume: cannot read '" + path + "'");
  uint8_t len_bytes[8];
  if (size < 8 || !in.read(reinterpret_cast<char*>(len_bytes), 8)) bad(path, "too short");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  if (n == 0 || n > kMaxHeader || n > size - 8) bad(path, "header length out of range");
  std::string text(n, '\0');
  if (!in.read(text.data(), std::streamsize(n))) bad(path, "truncated header");

  Header h;
  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception&) {
    bad(path, "header is not valid JSON");
  }
  if (!header.is_object() || !header.contains("__metadata__") || !header["__metadata__"].is_object())
    bad(path, "no __metadata__ in its header");
  const json& meta = header["__metadata__"];
  if (meta.value("format", "") != kFormat) bad(path, "not written by tiny_llama");
  if (meta.value("format_version", "") != kFormatVersion)
    bad(path, "format version '" + meta.value("format_version", "") + "' (this build reads " + kFormatVersion + ")");
  try {
    h.info.config = ModelConfig::from_json(json::parse(meta.at("config").get<std::string>()));
    h.info.config.validate();
  } catch (const json::exception&) {
    bad(path, "malformed model configuration in its metadata");
  } catch (const UsageError& e) {
    bad(path, std::string("invalid model configuration (") + e.what() + ")");
  }
  h.info.step = parse_int(meta, "step", path);
  h.info.data_position = parse_int(meta, "data_position", path);
  h.info.seed = uint64_t(parse_int(meta, "seed", path));
  if (!meta.contains("data") || !meta["data"].is_string()) bad(path, "no 'data' in its metadata");
  h.info.data_identity = meta["data"].get<std::string>();
  // The training sequence length: its own field since it was added, else from the data's identity.
  const size_t at = h.info.data_identity.find("seq_len=");
  if (meta.contains("seq_len")) {
    const int64_t t = parse_int(meta, "seq_len", path);
    if (t > INT32_MAX) bad(path, "metadata 'seq_len' out of range");  // 0: not recorded
    h.info.seq_len = int(t);
  } else if (at != std::string::npos) {
    h.info.seq_len = std::atoi(h.info.data_identity.c_str() + at + 8);
  }

  h.data_start = 8 + n;
  const uint64_t data_size = size - h.data_start;
  h.tensors = header;
  h.tensors.erase("__metadata__");
  const std::vector<Expected> expected = expected_tensors(h.info.config);
  if (h.tensors.size() != expected.size())
    bad(path, "holds " + std::to_string(h.tensors.size()) + " tensors, expected " +
                  std::to_string(expected.size()));
  uint64_t covered = 0;
  for (const Expected& e : expected) {
    if (!h.tensors.contains(e.name)) bad(path, "tensor '" + e.name + "' is missing");
    const json& t = h.tensors[e.name];
    try {
      if (t.at("dtype").get<std::string>() != "F32") bad(path, "tensor '" + e.name + "' is not F32");
      if (t.at("shape").get<std::vector<int64_t>>() != e.shape)
        bad(path, "tensor '" + e.name + "' has the wrong shape");
      const auto off = t.at("data_offsets").get<std::vector<uint64_t>>();
      if (off.size() != 2 || off[0] > off[1] || off[1] > data_size ||
          off[1] - off[0] != uint64_t(e.numel) * 4)
        bad(path, "tensor '" + e.name + "' has data offsets outside the file");
      covered += off[1] - off[0];
    } catch (const json::exception&) {
      bad(path, "tensor '" + e.name + "' has a malformed entry");
    }
  }
  if (covered != data_size) bad(path, "file size does not match its tensors (truncated?)");
  return h;
}

}  // namespace

CheckpointInfo read_checkpoint_info(const std::string& path) { return read_header(path).info; }

void save_checkpoint(const std::string& path, Llama& model, const CheckpointInfo& info) {
  const ModelConfig& c = model.config();
  const int64_t P = c.param_count();
  json header;
  for (const Expected& e : expected_tensors(c)) {
    const uint64_t begin = (uint64_t(e.which) * P + e.offset) * 4;
    header[e.name] = {{"dtype", "F32"}, {"shape", e.shape}, {"data_offsets", {begin, begin + e.numel * 4}}};
  }
  header["__metadata__"] = {{"format", kFormat},
                            {"format_version", kFormatVersion},
                            {"step", std::to_string(info.step)},
                            {"data_position", std::to_string(info.data_position)},
                            {"data", info.data_identity},
                            {"config", c.to_json().dump()},
                            {"seed", std::to_string(info.seed)},
                            {"seq_len", std::to_string(info.seq_len)}};
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');  // data starts 8-byte aligned
  const std::vector<float> buffers[3] = {model.read_f32(model.params()), model.read_f32(model.adam_m()),
                                         model.read_f32(model.adam_v())};
  write_file_atomic(path, [&](std::ostream& out) {
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), std::streamsize(text.size()));
    for (const std::vector<float>& b : buffers)
      out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size() * 4));
  });
}

void load_checkpoint(const std::string& path, Llama& model) {
  const Header h = read_header(path);
  if (!(h.info.config == model.config())) bad(path, "its model configuration differs from this run's");
  const int64_t P = model.config().param_count();
  std::vector<float> buffers[3] = {std::vector<float>(size_t(P)), std::vector<float>(size_t(P)),
                                   std::vector<float>(size_t(P))};
  std::ifstream in(path, std::ios::binary);
  for (const Expected& e : expected_tensors(model.config())) {
    const uint64_t begin = h.tensors[e.name]["data_offsets"][0].get<uint64_t>();
    in.seekg(std::streamoff(h.data_start + begin));
    if (!in.read(reinterpret_cast<char*>(buffers[e.which].data() + e.offset), std::streamsize(e.numel * 4)))
      bad(path, "cannot read tensor '" + e.name + "'");
  }
  model.write(model.params(), buffers[0]);
  model.write(model.adam_m(), buffers[1]);
  model.write(model.adam_v(), buffers[2]);
  model.backend().zero(model.grads());
}

}  // namespace tt
