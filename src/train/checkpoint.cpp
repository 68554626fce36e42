#include "train/checkpoint.h"

#include <fmt/format.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <map>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "core/error.h"
#include "core/files.h"
#include "core/json_input.h"
#include "data/safetensors.h"
#include "model/params.h"
#include "train/train_flags.h"

namespace tt {

using json = nlohmann::json;

namespace {

constexpr const char* kFormat = "tiny_llama";
constexpr const char* kFormatVersion = "1";
const std::string kTokenizerPrefix = "tokenizer/";  // tensors of the tokenizer's files: tokenizer/tokenizer.model
// Version 5's delayed scaling: every FP8 tensor's scale, amax and amax history (rank 0's), F32,
// one dimension; only where the run had filled its history.
const std::string kFp8ScaleState = "fp8/scale_state";

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

[[noreturn]] void bad(const std::string& flag, const std::string& path, const std::string& what) {
  usage_fail(flag + ": '" + path + "' is not a usable checkpoint: " + what);
}

// A count in the metadata: decimal digits only, within [0, max].
int64_t parse_count(const std::map<std::string, std::string>& meta, const char* key, const std::string& flag,
                    const std::string& path, int64_t max = INT64_MAX) {
  const auto it = meta.find(key);
  if (it == meta.end()) bad(flag, path, std::string("no '") + key + "' in its metadata");
  const std::string& s = it->second;
  if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos)
    bad(flag, path, std::string("metadata '") + key + "' is not a count");
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
  if (errno == ERANGE || v > uint64_t(max)) bad(flag, path, std::string("metadata '") + key + "' is out of range");
  return int64_t(v);
}

struct Header {
  SafetensorsFile file;  // its structure checked by the safetensors reader
  CheckpointInfo info;
};

// The safetensors reader checks the file's structure (a bounded header, known dtypes, tensors
// covering the data exactly); this checks the project's schema: the metadata's fields and
// types, and exactly the tensors of the configuration, F32, with their shapes.
Header read_header(const std::string& path, const std::string& flag) {
  Header h;
  try {
    h.file = read_safetensors(path, flag);
  } catch (const UsageError& e) {
    usage_fail(std::string(e.what()) + ", so it is not a usable checkpoint");  // names flag and path already
  }
  const std::map<std::string, std::string>& meta = h.file.metadata;
  auto text = [&](const char* key) {
    const auto it = meta.find(key);
    if (it == meta.end()) bad(flag, path, std::string("no '") + key + "' in its metadata");
    return it->second;
  };
  if (text("format") != kFormat) bad(flag, path, "not written by tiny_llama");
  if (text("format_version") != kFormatVersion)
    bad(flag, path, "format version '" + text("format_version") + "' (this build reads " + kFormatVersion + ")");
  json config;
  try {
    config = parse_json_input(text("config"), "its metadata 'config'", 4);
  } catch (const UsageError&) {
    bad(flag, path, "malformed model configuration in its metadata");
  }
  try {
    h.info.config = ModelConfig::from_json(config);
    h.info.config.validate();
  } catch (const json::exception&) {
    bad(flag, path, "malformed model configuration in its metadata");
  } catch (const UsageError& e) {
    bad(flag, path, std::string("invalid model configuration (") + e.what() + ")");
  }
  h.info.step = parse_count(meta, "step", flag, path, INT32_MAX);
  h.info.data_position = parse_count(meta, "data_position", flag, path);
  if (meta.count("data_epoch")) h.info.data_epoch = parse_count(meta, "data_epoch", flag, path);  // 0 before passes were counted
  h.info.seed = uint64_t(parse_count(meta, "seed", flag, path));
  h.info.data_identity = text("data");
  // The training sequence length: its own field since it was added, else from the data's identity.
  if (meta.count("seq_len")) {
    h.info.seq_len = int(parse_count(meta, "seq_len", flag, path, INT32_MAX));  // 0: not recorded
  } else if (const size_t at = h.info.data_identity.find("seq_len="); at != std::string::npos) {
    h.info.seq_len = int(std::min<long>(INT32_MAX, std::max(0L, std::strtol(h.info.data_identity.c_str() + at + 8, nullptr, 10))));
  }
  if (const auto it = meta.find("run"); it != meta.end()) {
    if (it->second.size() > 64 || it->second.find_first_not_of("0123456789abcdef") != std::string::npos)
      bad(flag, path, "metadata 'run' is not a run identity");
    h.info.run_id = it->second;
  }
  if (const auto it = meta.find("recipe"); it != meta.end()) {
    try {  // an object of flags to numbers, texts and switches, checked against the table
      h.info.recipe = parse_json_input(it->second, "its metadata 'recipe'", 2);
    } catch (const UsageError&) {
      bad(flag, path, "metadata 'recipe' is not JSON of flags and values");
    }
    if (!h.info.recipe.is_object()) bad(flag, path, "metadata 'recipe' is not an object of flags and values");
    const std::vector<const TrainFlag*> stored = train_flags_with(kStored);
    for (const auto& [name, value] : h.info.recipe.items())
      if (value.is_structured() ||
          std::none_of(stored.begin(), stored.end(), [&](const TrainFlag* f) { return f->name() == name; }))
        bad(flag, path, "its recipe holds '" + name.substr(0, 64) + "', not a stored flag of this build");
  }
  // The tokenizer's files: the kind's own names, bytes each, those it must have present.
  size_t tokenizer_tensors = 0;
  if (const auto it = meta.find("tokenizer"); it != meta.end()) {
    TokenizerKind kind;
    if (!tokenizer_kind_named(it->second, &kind))
      bad(flag, path, "metadata 'tokenizer' names no tokenizer this build reads ('" + it->second.substr(0, 64) + "')");
    h.info.tokenizer = it->second;
    for (const TokenizerFileName& name : tokenizer_file_names(kind)) {
      const SafetensorInfo* t = h.file.find(kTokenizerPrefix + name.name);
      if (!t && name.required) bad(flag, path, "tensor '" + kTokenizerPrefix + name.name + "' of its tokenizer is missing");
      if (t && (t->dtype != "U8" || t->shape.size() != 1))
        bad(flag, path, "tensor '" + t->name + "' is not the bytes of a file (U8, one dimension)");
      tokenizer_tensors += t != nullptr;
    }
  }
  const SafetensorInfo* scales = h.file.find(kFp8ScaleState);
  if (scales && (scales->dtype != "F32" || scales->shape.size() != 1))
    bad(flag, path, "tensor '" + kFp8ScaleState + "' is not F32 of one dimension");
  const std::vector<Expected> expected = expected_tensors(h.info.config);
  const size_t extra = tokenizer_tensors + (scales != nullptr);
  if (h.file.tensors.size() != expected.size() + extra)
    bad(flag, path, "holds " + std::to_string(h.file.tensors.size()) + " tensors, expected " +
                        std::to_string(expected.size() + extra));
  for (const Expected& e : expected) {
    const SafetensorInfo* t = h.file.find(e.name);
    if (!t) bad(flag, path, "tensor '" + e.name + "' is missing");
    if (t->dtype != "F32") bad(flag, path, "tensor '" + e.name + "' is not F32");
    if (t->shape != e.shape) bad(flag, path, "tensor '" + e.name + "' has the wrong shape");
  }
  return h;
}

}  // namespace

CheckpointInfo read_checkpoint_info(const std::string& path, const std::string& flag) {
  return read_header(path, flag).info;
}

std::optional<TokenizerFiles> read_checkpoint_tokenizer(const std::string& path, const std::string& flag) {
  const Header h = read_header(path, flag);
  if (h.info.tokenizer.empty()) return std::nullopt;
  TokenizerFiles f;
  tokenizer_kind_named(h.info.tokenizer, &f.kind);  // checked by read_header
  for (const TokenizerFileName& name : tokenizer_file_names(f.kind))
    if (const SafetensorInfo* t = h.file.find(kTokenizerPrefix + name.name))
      f.files.emplace_back(name.name, read_tensor_bytes(h.file, *t));
  return f;
}

void save_checkpoint(const std::string& path, Llama& model, const CheckpointInfo& info, const TokenizerFiles* tokenizer) {
  const ModelConfig& c = model.config();
  const int64_t P = c.param_count();
  json header;
  for (const Expected& e : expected_tensors(c)) {
    const uint64_t begin = (uint64_t(e.which) * P + e.offset) * 4;
    header[e.name] = {{"dtype", "F32"}, {"shape", e.shape}, {"data_offsets", {begin, begin + e.numel * 4}}};
  }
  static const TokenizerFiles none;
  uint64_t end = uint64_t(3) * P * 4;  // the FP8 scales, then the tokenizer's files, after the model's tensors
  const Tensor scales = model.fp8_scale_state();
  if (!scales.empty()) {
    header[kFp8ScaleState] = {{"dtype", "F32"}, {"shape", json::array({scales.numel})},
                              {"data_offsets", {end, end + uint64_t(scales.numel) * 4}}};
    end += uint64_t(scales.numel) * 4;
  }
  for (const auto& [name, bytes] : (tokenizer ? *tokenizer : none).files) {
    header[kTokenizerPrefix + name] = {{"dtype", "U8"}, {"shape", json::array({bytes.size()})},
                                       {"data_offsets", {end, end + bytes.size()}}};
    end += bytes.size();
  }
  header["__metadata__"] = {{"format", kFormat},
                            {"format_version", kFormatVersion},
                            {"step", std::to_string(info.step)},
                            {"data_position", std::to_string(info.data_position)},
                            {"data_epoch", std::to_string(info.data_epoch)},
                            {"data", info.data_identity},
                            {"config", c.to_json().dump()},
                            {"seed", std::to_string(info.seed)},
                            {"seq_len", std::to_string(info.seq_len)},
                            {"run", info.run_id},
                            {"recipe", info.recipe.dump()}};
  if (tokenizer) header["__metadata__"]["tokenizer"] = tokenizer_kind_name(tokenizer->kind);
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');  // data starts 8-byte aligned
  // Tensor by tensor: the host holds one tensor at a time, not three copies of the model. Every
  // rank of a data-parallel run goes through the same steps (gathering the masters and the
  // optimizer state is a collective under ZeRO-1) and the same checks; rank 0 alone writes. A
  // value that is not finite (a run that diverged) stops the write, and the last checkpoint stays
  // as it was.
  const std::vector<Expected> tensors = expected_tensors(c);
  auto emit = [&](const std::function<void(const std::vector<float>&)>& sink) {
    for (int which = 0; which < 3; ++which) {
      const Tensor source = which == 0 ? model.whole_params() : model.optimizer_state(which);
      for (const Expected& e : tensors) {
        if (e.which != which) continue;
        const std::vector<float> v = model.read_f32(source.slice(e.offset, e.numel));
        for (float x : v)
          if (!std::isfinite(x))
            fail("training diverged: tensor '" + e.name + "' holds a value that is not finite at step " +
                 std::to_string(info.step) + "; the checkpoint '" + path + "' is not written (the last one stays)");
        sink(v);
      }
    }
    if (!scales.empty()) sink(model.read_f32(scales));
  };
  if (model.rank() != 0) return emit([](const std::vector<float>&) {});
  write_file_atomic(path, [&](std::ostream& out) {
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), std::streamsize(text.size()));
    emit([&](const std::vector<float>& v) { out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * 4)); });
    if (tokenizer)
      for (const auto& [name, bytes] : tokenizer->files) out.write(bytes.data(), std::streamsize(bytes.size()));
  });
}

namespace {

// DIR's step files, by step: step_ and eight or more digits, .safetensors.
std::vector<std::pair<int64_t, std::string>> step_files(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const size_t end = name.size() - std::min(name.size(), std::string(".safetensors").size());
    if (name.rfind("step_", 0) != 0 || name.substr(end) != ".safetensors" || end < 13 || end > 5 + 18) continue;
    const std::string digits = name.substr(5, end - 5);
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    found.emplace_back(std::stoll(digits), e.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

// The run that wrote a step file; nullopt when it is no checkpoint this build reads.
std::optional<std::string> run_of(const std::string& path) {
  try {
    return read_header(path, "--save-dir").info.run_id;
  } catch (const UsageError&) {
    return std::nullopt;
  }
}

std::string describe_run(const std::optional<std::string>& run) {
  return !run ? "not a checkpoint of this build" : run->empty() ? "a run without identity" : "run " + *run;
}

}  // namespace

std::string step_checkpoint_path(const std::string& dir, int64_t step) {
  return (std::filesystem::path(dir) / fmt::format("step_{:08d}.safetensors", step)).string();
}

std::string latest_step_checkpoint(const std::string& dir, const std::string& flag) {
  const auto found = step_files(dir);
  if (found.empty()) usage_fail(flag + ": '" + dir + "' holds no step checkpoint (step_*.safetensors)");
  const std::optional<std::string> latest = run_of(found.back().second);
  const std::vector<std::string> others = other_runs_step_files(dir, latest.value_or("?"));
  if (!latest || !others.empty())
    usage_fail(flag + ": '" + dir + "' holds the step files of more than one run or files that are not checkpoints (" +
               found.back().second + ": " + describe_run(latest) + "; " + others.front() +
               "): give the checkpoint to resume, or keep each run in a directory of its own");
  return found.back().second;
}

std::vector<std::string> other_runs_step_files(const std::string& dir, const std::string& run_id) {
  std::vector<std::string> others;
  for (const auto& [step, path] : step_files(dir))
    if (const std::optional<std::string> run = run_of(path); run != run_id)
      others.push_back(std::filesystem::path(path).filename().string() + " (" + describe_run(run) + ")");
  return others;
}

void remove_older_step_checkpoints(const std::string& dir, int keep, const std::string& run_id) {
  if (keep <= 0) return;
  std::vector<std::string> ours;
  for (const auto& [step, path] : step_files(dir))
    if (run_of(path) == run_id) ours.push_back(path);
  std::error_code ec;
  for (size_t i = 0; i + size_t(keep) < ours.size(); ++i) std::filesystem::remove(ours[i], ec);
}

std::string new_run_id() {
  std::random_device entropy;
  return fmt::format("{:08x}{:08x}", entropy(), entropy());
}

std::vector<float> read_checkpoint_params(const std::string& path, const ModelConfig& config, const std::string& flag) {
  const Header h = read_header(path, flag);
  if (!(h.info.config == config)) bad(flag, path, "its model configuration differs from this run's");
  std::vector<float> params(size_t(config.param_count()));
  for (const Expected& e : expected_tensors(config)) {
    if (e.which != 0) continue;
    const std::vector<float> v = read_tensor_f32(h.file, *h.file.find(e.name));
    for (float x : v)
      if (!std::isfinite(x)) bad(flag, path, "tensor '" + e.name + "' holds a value that is not finite");
    std::copy(v.begin(), v.end(), params.begin() + e.offset);
  }
  return params;
}

void load_checkpoint(const std::string& path, Llama& model, const std::string& flag) {
  const Header h = read_header(path, flag);
  if (!(h.info.config == model.config())) bad(flag, path, "its model configuration differs from this run's");
  // Every tensor is checked before the model is touched; then loaded one at a time.
  for (const Expected& e : expected_tensors(model.config())) {
    const std::vector<float> v = read_tensor_f32(h.file, *h.file.find(e.name));
    for (float x : v)
      if (!std::isfinite(x)) bad(flag, path, "tensor '" + e.name + "' holds a value that is not finite");
    if (e.which == 2)
      for (float x : v)
        if (x < 0) bad(flag, path, "tensor '" + e.name + "' holds a negative second moment");
  }
  std::vector<float> scales;
  if (const SafetensorInfo* t = h.file.find(kFp8ScaleState)) {
    scales = read_tensor_f32(h.file, *t);
    for (float x : scales)
      if (!std::isfinite(x)) bad(flag, path, "tensor '" + kFp8ScaleState + "' holds a value that is not finite");
  }
  for (const Expected& e : expected_tensors(model.config())) {
    std::vector<float> v = read_tensor_f32(h.file, *h.file.find(e.name));
    if (e.which == 0)
      model.write(model.params().slice(e.offset, e.numel), v);
    else
      model.load_optimizer_state(e.which, e.offset, v);  // this rank's parts, under ZeRO-1
  }
  // Delayed scaling goes on from the stored history, as the uninterrupted run's; a run with
  // another plan (v4, current scaling) has no use for it, and one without it calibrates again.
  if (!scales.empty() && model.takes_fp8_scale_state(int64_t(scales.size()))) model.restore_fp8_scale_state(scales);
  model.backend().zero(model.grads());
}

}  // namespace tt
