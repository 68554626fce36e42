#include "train/hf.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/files.h"
#include "core/json_input.h"
#include "data/bpe_tokenizer.h"
#include "data/safetensors.h"
#include "data/sentencepiece_json.h"
#include "data/tokenizer.h"
#include "model/llama.h"
#include "model/params.h"
#include "train/bound_tokenizer.h"
#include "train/checkpoint.h"

namespace tt {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

void permute_rows(std::vector<float>& rows, int heads, int d, int64_t cols, bool to_hf) {
  TT_CHECK(int64_t(rows.size()) == int64_t(heads) * d * cols, "RoPE permutation: wrong size");
  std::vector<float> out(rows.size());
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < d / 2; ++i)
      for (int j = 0; j < 2; ++j) {
        const int64_t ours = int64_t(h) * d + 2 * i + j, theirs = int64_t(h) * d + int64_t(j) * (d / 2) + i;
        const int64_t from = to_hf ? ours : theirs, to = to_hf ? theirs : ours;
        std::copy_n(rows.begin() + from * cols, cols, out.begin() + to * cols);
      }
  rows.swap(out);
}

bool is_rope_projection(const std::string& name) {
  return name.find("self_attn.q_proj") != std::string::npos || name.find("self_attn.k_proj") != std::string::npos;
}

int heads_of(const std::string& name, const ModelConfig& c) {
  return name.find("q_proj") != std::string::npos ? c.heads : c.kv_heads;
}

void write_json(const fs::path& path, const json& j) {
  write_file_atomic(path.string(), [&](std::ostream& out) { out << j.dump(2) << "\n"; });
}

// The tokenizer as transformers' fast tokenizers read it: tokenizer.json (bytes: a byte-level BPE
// without merges; SentencePiece: its model converted, beside tokenizer.model; a tokenizer.json:
// itself, its post-processor made ours) and tokenizer_config.json. Encoding a text, transformers
// then puts BOS first exactly where tokenize puts it first in a document (add_bos_token, which
// transformers turns into the post-processor; tokenizer.json's is the same, for the tokenizers
// library alone), and no EOS last (a prompt goes on). EOS pads. No model_max_length: RoPE has no
// length limit, and transformers then sets none.
void write_tokenizer(const fs::path& dir, const Tokenizer& tok, const TokenizerFiles& files) {
  const int start = document_start(tok);
  json config = {{"tokenizer_class", "PreTrainedTokenizerFast"}, {"clean_up_tokenization_spaces", false},
                 {"add_bos_token", start >= 0}, {"add_eos_token", false}};
  switch (tok.kind()) {
    case TokenizerKind::Bytes: {  // byte b is token b
      json vocab = json::object();
      const std::vector<std::string> chars = byte_characters();
      for (int b = 0; b < 256; ++b) vocab[chars[size_t(b)]] = b;
      const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
      write_json(dir / "tokenizer.json",
                 {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", json::array()},
                  {"normalizer", nullptr}, {"pre_tokenizer", byte_level}, {"post_processor", nullptr}, {"decoder", byte_level},
                  {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
                             {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
                             {"ignore_merges", false}, {"vocab", vocab}, {"merges", json::array()}}}});
      break;
    }
    case TokenizerKind::SentencePiece: {
      write_file_atomic((dir / "tokenizer.model").string(), [&](std::ostream& out) { out << *files.find("tokenizer.model"); });
      // What most of the ecosystem reads first.
      const std::string tokenizer_json = sentencepiece_tokenizer_json((dir / "tokenizer.model").string());
      write_file_atomic((dir / "tokenizer.json").string(), [&](std::ostream& out) { out << tokenizer_json << "\n"; });
      config.update({{"unk_token", "<unk>"}, {"legacy", false}, {"sp_model_kwargs", json::object()}});
      break;
    }
    case TokenizerKind::ByteLevelBpe: {
      nlohmann::ordered_json file = nlohmann::ordered_json::parse(*files.find("tokenizer.json"));
      file["post_processor"] = bos_post_processor(start >= 0 ? tok.special_name(start) : "", start);
      write_file_atomic((dir / "tokenizer.json").string(), [&](std::ostream& out) { out << file.dump(1) << "\n"; });
      break;
    }
  }
  json special = json::object();
  if (tok.bos() >= 0) special["bos_token"] = tok.special_name(tok.bos());
  if (tok.eos() >= 0) special["eos_token"] = special["pad_token"] = tok.special_name(tok.eos());
  if (tok.kind() == TokenizerKind::SentencePiece) special["unk_token"] = "<unk>";
  config.update(special);
  write_json(dir / "tokenizer_config.json", config);
  write_json(dir / "special_tokens_map.json", special);
}

}  // namespace

void rope_rows_to_hf(std::vector<float>& rows, int heads, int d, int64_t cols) { permute_rows(rows, heads, d, cols, true); }
void rope_rows_from_hf(std::vector<float>& rows, int heads, int d, int64_t cols) { permute_rows(rows, heads, d, cols, false); }

namespace {
void write_export(const ExportOptions& o, const CheckpointInfo& info, const BoundTokenizer& tok, const fs::path& dir);
}  // namespace

void export_hf(const ExportOptions& o, std::ostream& log) {
  if (o.dtype != "bf16" && o.dtype != "fp32") usage_fail("--dtype: must be bf16 or fp32 (got '" + o.dtype + "')");
  if (o.out_dir.empty()) usage_fail("--hf: give the directory to write");
  const CheckpointInfo info = read_checkpoint_info(o.checkpoint, "export");
  const ModelConfig& c = info.config;
  const BoundTokenizer bound = model_source_tokenizer(o.tokenizer, o.checkpoint, false, c.vocab_size, "export");
  const std::unique_ptr<Tokenizer>& tok = bound.tokenizer;
  // The directory is written whole or not at all: into a sibling, which then takes its name. An
  // existing one may hold an earlier export's files only (they are replaced, none is left over).
  std::error_code ec;
  // The directory a link names is replaced, not the link; the current directory (or one holding
  // it) is refused: replacing it would leave the shell in a deleted directory.
  fs::path named = fs::absolute(o.out_dir, ec).lexically_normal();
  if (!named.has_filename()) named = named.parent_path();  // "dir/"
  const fs::path out = fs::weakly_canonical(named, ec), here = fs::current_path(ec);
  if (!out.has_filename() || out == out.root_path() || here.lexically_relative(out).string().rfind("..", 0) != 0)
    usage_fail("--hf: '" + o.out_dir + "' is the current directory or holds it: give the export directory by a name of its own");
  if (fs::exists(out, ec) && !fs::is_directory(out, ec)) usage_fail("--hf: '" + o.out_dir + "' is not a directory");
  static const std::set<std::string> exported = {"config.json",      "generation_config.json", "model.safetensors",
                                                 "tokenizer.json",   "tokenizer_config.json",  "tokenizer.model",
                                                 "special_tokens_map.json"};
  if (fs::is_directory(out, ec))
    for (const auto& e : fs::directory_iterator(out, ec))
      if (!exported.count(e.path().filename().string()) || !e.is_regular_file())
        usage_fail("--hf: '" + o.out_dir + "' holds '" + e.path().filename().string() +
                   "', which no export writes: give a new or empty directory, or an earlier export's");
  check_distinct_paths({{"--hf", (out / "model.safetensors").string()}, {"--hf", (out / "tokenizer.model").string()},
                        {"--hf", (out / "tokenizer.json").string()}, {"--hf", (out / "tokenizer_config.json").string()}},
                       {{"the checkpoint", o.checkpoint}, {"--tokenizer", tok->path()}});
  const fs::path parent = out.parent_path();
  if (!fs::is_directory(parent, ec)) usage_fail("--hf: directory '" + parent.string() + "' does not exist");
  remove_stale_temporaries(parent.string(), [&](const std::string& base) { return base == out.filename().string(); });
  const fs::path staging = parent / (out.filename().string() + ".tmp." + std::to_string(::getpid()));
  fs::create_directories(staging, ec);
  if (ec) usage_fail("--hf: cannot create '" + staging.string() + "': " + ec.message());
  const fs::path old = parent / (out.filename().string() + ".old." + std::to_string(::getpid()));
  try {
    write_export(o, info, bound, staging);
    if (fs::exists(out)) fs::rename(out, old);
    fs::rename(staging, out);
    fs::remove_all(old, ec);
  } catch (...) {
    fs::remove_all(staging, ec);
    if (fs::exists(old, ec) && !fs::exists(out, ec)) fs::rename(old, out, ec);  // the earlier export back
    try {
      throw;
    } catch (const fs::filesystem_error& e) {
      fail("--hf: cannot put the export in place of '" + o.out_dir + "': " + e.code().message());
    }
  }
  log << fmt::format("Exported {} (step {}, {} parameters) to {} as {} LlamaForCausalLM, tokenizer: {}\n", o.checkpoint,
                     info.step, c.param_count(), o.out_dir, o.dtype, tok->describe());
}

namespace {

void write_export(const ExportOptions& o, const CheckpointInfo& info, const BoundTokenizer& bound, const fs::path& dir) {
  const ModelConfig& c = info.config;
  const Tokenizer& tok = *bound.tokenizer;

  auto be = make_backend({DeviceKind::Cpu, plan_for_version(1)});
  Llama model(c, *be, 1, 1);
  load_checkpoint(o.checkpoint, model, "export");
  const std::vector<float> params = model.read_f32(model.params());
  std::vector<TensorOut> tensors;
  for (const ParamEntry& e : param_table(c)) {
    TensorOut t{e.name, e.shape, std::vector<float>(params.begin() + e.offset, params.begin() + e.offset + e.numel)};
    if (is_rope_projection(e.name)) rope_rows_to_hf(t.values, heads_of(e.name, c), c.head_dim(), c.hidden);
    tensors.push_back(std::move(t));
  }
  write_safetensors((dir / "model.safetensors").string(), tensors, {{"format", "pt"}}, o.dtype == "bf16");
  const int context = info.seq_len > 0 ? info.seq_len : 2048;
  const json special = tok.bos() >= 0 ? json(tok.bos()) : json(nullptr), eos = tok.eos() >= 0 ? json(tok.eos()) : json(nullptr);
  const std::string dtype = o.dtype == "bf16" ? "bfloat16" : "float32";
  write_json(dir / "config.json",
             {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", c.vocab_size},
              {"hidden_size", c.hidden}, {"intermediate_size", c.intermediate}, {"num_hidden_layers", c.layers},
              {"num_attention_heads", c.heads}, {"num_key_value_heads", c.kv_heads}, {"head_dim", c.head_dim()},
              {"hidden_act", "silu"}, {"max_position_embeddings", context}, {"rms_norm_eps", c.norm_eps},
              {"rope_theta", c.rope_theta}, {"rope_scaling", nullptr},
              {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", c.rope_theta}}},
              {"tie_word_embeddings", c.tie_embeddings}, {"attention_bias", false}, {"attention_dropout", 0.0}, {"mlp_bias", false},
              {"initializer_range", 0.02}, {"use_cache", true}, {"bos_token_id", special}, {"eos_token_id", eos},
              {"pad_token_id", eos}, {"torch_dtype", dtype}, {"dtype", dtype}});
  write_json(dir / "generation_config.json", {{"bos_token_id", special}, {"eos_token_id", eos}, {"pad_token_id", eos},
                                              {"do_sample", true}, {"temperature", 0.8}, {"max_length", context}});
  write_tokenizer(dir, tok, bound.files);
}

}  // namespace

namespace {

// config.json and model.safetensors.index.json: a few kilobytes each in real models.
constexpr size_t kMaxJsonBytes = size_t(64) << 20;

ModelConfig read_hf_fields(const json& cfg, const std::function<void(const std::string&)>& bad, int* context);

// The model a LLaMA directory's config.json describes (UsageError through `bad` for one this
// model cannot be), and its context (max_position_embeddings, 0 when absent).
ModelConfig read_hf_config(const fs::path& dir, const std::function<void(const std::string&)>& bad, int* context) {
  if (!fs::exists(dir / "config.json")) bad("has no config.json");
  json cfg;
  try {
    cfg = read_json_file((dir / "config.json").string(), "config.json", kMaxJsonBytes);
  } catch (const UsageError& e) {
    bad(std::string("cannot be read: ") + e.what());
  }
  if (!cfg.is_object()) bad("has a config.json that is not a JSON object");
  return read_hf_fields(cfg, bad, context);
}

ModelConfig read_hf_fields(const json& cfg, const std::function<void(const std::string&)>& bad, int* context) {
  // Each field of its type or absent (null), else refused naming it; fallback where absent.
  auto typed = [&](const char* key, bool (json::*is)() const noexcept, const char* type) -> const json& {
    const json& v = json_member(cfg, key);
    if (!v.is_null() && !(v.*is)()) bad(std::string("has a config.json whose ") + key + " is " + json_brief(v) + ", not " + type);
    return v;
  };
  auto number = [&](const char* key, double fallback) {
    const json& v = typed(key, &json::is_number, "a number");
    return v.is_null() ? fallback : v.get<double>();
  };
  auto text = [&](const char* key, const char* fallback) {
    const json& v = typed(key, &json::is_string, "a string");
    return v.is_null() ? std::string(fallback) : v.get<std::string>();
  };
  auto boolean = [&](const char* key, bool fallback) {
    const json& v = typed(key, &json::is_boolean, "true or false");
    return v.is_null() ? fallback : v.get<bool>();
  };
  if (text("model_type", "") != "llama") bad("is not a LLaMA (model_type is not \"llama\")");
  if (text("hidden_act", "silu") != "silu") bad("uses another activation than SiLU");
  if (boolean("attention_bias", false) || boolean("mlp_bias", false)) bad("has biases, which this model does not");
  if (!json_member(cfg, "rope_scaling").is_null()) bad("scales RoPE, which this model does not");
  auto count = [&](const char* key, double fallback) {
    const double v = number(key, fallback);
    if (!(v >= 1 && v <= 1e9 && v == double(int64_t(v)))) bad(std::string("has a config.json whose ") + key + " is not a count");
    return int(v);
  };
  ModelConfig m;
  m.vocab_size = count("vocab_size", 0);
  m.hidden = count("hidden_size", 0);
  m.layers = count("num_hidden_layers", 0);
  m.heads = count("num_attention_heads", 0);
  m.kv_heads = count("num_key_value_heads", m.heads);
  m.intermediate = count("intermediate_size", 0);
  m.norm_eps = number("rms_norm_eps", 1e-6);
  m.rope_theta = number("rope_theta", 10000);
  m.tie_embeddings = boolean("tie_word_embeddings", false);  // transformers' LlamaConfig unties by default
  if (count("head_dim", m.hidden / m.heads) * m.heads != m.hidden)
    bad("has a head_dim other than hidden_size / num_attention_heads, which this model does not");
  *context = json_member(cfg, "max_position_embeddings").is_null() ? 0 : count("max_position_embeddings", 1);
  return m;
}

}  // namespace

ModelConfig hf_model_config(const std::string& dir, const std::string& flag, int* context) {
  const ModelConfig m = read_hf_config(dir, [&](const std::string& what) { usage_fail(flag + ": '" + dir + "' " + what); },
                                       context);
  try {
    m.validate();
  } catch (const UsageError& e) {
    usage_fail(flag + ": '" + dir + "' describes a model this program cannot build: " + e.what());
  }
  return m;
}

std::vector<float> import_hf(const std::string& dir_name, const ModelConfig& c, const std::string& flag) {
  const fs::path dir(dir_name);
  auto bad = [&](const std::string& what) -> void { usage_fail(flag + ": '" + dir_name + "' " + what); };
  int context = 0;
  const ModelConfig theirs = read_hf_config(dir, bad, &context);
  const struct {
    const char* key;
    double theirs, ours;
    const char* flag;
  } fields[] = {{"vocab_size", double(theirs.vocab_size), double(c.vocab_size), "--vocab-size"},
                {"hidden_size", double(theirs.hidden), double(c.hidden), "--hidden-dim"},
                {"num_hidden_layers", double(theirs.layers), double(c.layers), "--num-layers"},
                {"num_attention_heads", double(theirs.heads), double(c.heads), "--num-heads"},
                {"num_key_value_heads", double(theirs.kv_heads), double(c.kv_heads), "--num-kv-heads"},
                {"intermediate_size", double(theirs.intermediate), double(c.intermediate), "--intermediate-size"},
                {"rms_norm_eps", theirs.norm_eps, c.norm_eps, "--norm-eps"},
                {"rope_theta", theirs.rope_theta, c.rope_theta, "--rope-theta"},
                {"tie_word_embeddings", double(theirs.tie_embeddings), double(c.tie_embeddings),
                 c.tie_embeddings ? "--no-tie-embeddings" : "--tie-embeddings"}};
  for (const auto& f : fields)
    if (f.theirs != f.ours)
      bad(fmt::format("has {} {} where this run has {} (set {} to match)", f.key, f.theirs, f.ours, f.flag));
  // One file, or shards listed by model.safetensors.index.json.
  std::vector<SafetensorsFile> files;
  if (fs::exists(dir / "model.safetensors")) {
    files.push_back(read_safetensors((dir / "model.safetensors").string(), flag));
  } else {
    const fs::path index = dir / "model.safetensors.index.json";
    if (!fs::exists(index)) bad("has neither model.safetensors nor model.safetensors.index.json");
    std::set<std::string> shards;
    const json parsed = read_json_file(index.string(), flag, kMaxJsonBytes);
    const json& weight_map = json_member(parsed, "weight_map");
    if (!weight_map.is_object()) bad("has a model.safetensors.index.json without a weight_map of file names");
    for (auto& [name, file] : weight_map.items()) {
      if (!file.is_string()) bad("has a model.safetensors.index.json whose weight_map names " + json_brief(file) + " for " + json_brief(name));
      shards.insert(file.get<std::string>());
    }
    for (const std::string& s : shards) {
      if (s.find('/') != std::string::npos) bad("names a shard outside the directory: " + s);
      files.push_back(read_safetensors((dir / s).string(), flag));
    }
  }
  // Each tensor by its name and shape: a transposed weight has the right count and is refused.
  auto tensor = [&](const ParamEntry& e) -> std::vector<float> {
    for (const SafetensorsFile& f : files)
      if (const SafetensorInfo* t = f.find(e.name)) {
        if (t->shape != e.shape) {
          auto dims = [](const std::vector<int64_t>& s) {
            std::string out;
            for (int64_t d : s) out += (out.empty() ? "" : ", ") + std::to_string(d);
            return "[" + out + "]";
          };
          bad("has tensor '" + e.name + "' of shape " + dims(t->shape) + " where this model's is " + dims(e.shape));
        }
        return read_tensor_f32(f, *t);
      }
    bad("has no tensor '" + e.name + "'");
    return {};
  };
  std::vector<float> params(size_t(c.param_count()));
  for (const ParamEntry& e : param_table(c)) {
    std::vector<float> v = tensor(e);
    if (int64_t(v.size()) != e.numel) bad("has tensor '" + e.name + "' of another size");
    if (is_rope_projection(e.name)) rope_rows_from_hf(v, heads_of(e.name, c), c.head_dim(), c.hidden);
    for (float x : v)
      if (!std::isfinite(x)) bad("has a non-finite value in '" + e.name + "'");
    std::copy(v.begin(), v.end(), params.begin() + e.offset);
  }
  for (const SafetensorsFile& f : files)  // a tied model's copy of its head must be the embedding
    if (const SafetensorInfo* head = c.tie_embeddings ? f.find("lm_head.weight") : nullptr) {
      const ParamEntry& embed = param_table(c).back();
      if (read_tensor_f32(f, *head) != std::vector<float>(params.begin() + embed.offset, params.end()))
        bad("has an output head (lm_head) of its own, but tie_word_embeddings true");
    }
  return params;
}

ModelSource read_model_source(const std::string& path, const std::string& flag) {
  ModelSource m;
  m.hf_directory = fs::is_directory(path);
  std::error_code ec;
  if (m.hf_directory && !fs::exists(fs::path(path) / "config.json", ec))
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.path().filename().string().rfind("step_", 0) == 0 && e.path().extension() == ".safetensors")
        usage_fail(flag + ": '" + path + "' is a run's --save-dir, not a Hugging Face directory: give --save-dir " + path +
                   " for its latest checkpoint");
  if (m.hf_directory) {
    m.config = hf_model_config(path, flag, &m.context);
  } else {
    const CheckpointInfo info = read_checkpoint_info(path, flag);
    m.config = info.config;
    m.context = info.seq_len;
    m.step = info.step;
  }
  return m;
}

void load_model_source(const std::string& path, const ModelSource& source, Llama& model, const std::string& flag) {
  if (source.hf_directory)
    model.write(model.params(), import_hf(path, source.config, flag));
  else
    load_checkpoint(path, model, flag);
}

}  // namespace tt
