#include "fuzz_inputs.h"

#include <algorithm>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/backend.h"
#include "core/error.h"
#include "core/files.h"
#include "data/safetensors.h"
#include "data/token_file.h"
#include "data/tokenize.h"
#include "data/tokenizer.h"
#include "data/tokenizer_files.h"
#include "data/tokenizer_train.h"
#include "model/llama.h"
#include "train/checkpoint.h"
#include "data/loader.h"
#include "train/hf.h"
#include "train/task.h"

namespace tt::fuzz {

namespace fs = std::filesystem;

namespace {

void write_bytes(const fs::path& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

const ModelConfig& hf_model() {
  static const ModelConfig c = [] {
    ModelConfig m;
    m.vocab_size = 256, m.hidden = 8, m.layers = 1, m.heads = 2, m.kv_heads = 1, m.intermediate = 8;
    return m;
  }();
  return c;
}

const HfSeed& hf_seed() {
  static const HfSeed seed = [] {
    const fs::path dir = fs::temp_directory_path() / ("tt_fuzz_hf_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    auto be = make_backend({DeviceKind::Cpu, plan_for_version(1)});
    Llama m(hf_model(), *be, 1, 4);
    m.init_weights(1);
    save_checkpoint((dir / "ck").string(), m, CheckpointInfo{hf_model(), 1, 0, 0, "text bytes=1 fnv1a=1 seq_len=4", 1, 4, "0123456789abcdef", {{"--learning-rate", 0.0003}}});
    std::ostringstream log;
    export_hf({(dir / "ck").string(), (dir / "hf").string(), "fp32", "bytes"}, log);
    // The same weights in two shards and their index.
    const SafetensorsFile f = read_safetensors((dir / "hf" / "model.safetensors").string(), "fuzz");
    std::vector<TensorOut> parts[2];
    std::string map;
    for (size_t i = 0; i < f.tensors.size(); ++i) {
      const SafetensorInfo& t = f.tensors[i];
      parts[i % 2].push_back({t.name, t.shape, read_tensor_f32(f, t)});
      map += std::string(map.empty() ? "" : ", ") + "\"" + t.name + "\": \"s" + std::to_string(i % 2) + ".safetensors\"";
    }
    HfSeed s;
    s.dir = (dir / "hf").string();
    for (int k = 0; k < 2; ++k) write_safetensors((dir / "hf" / ("s" + std::to_string(k) + ".safetensors")).string(), parts[k], {}, false);
    fs::remove(dir / "hf" / "model.safetensors");
    s.config = slurp(dir / "hf" / "config.json");
    s.index = "{\"metadata\": {}, \"weight_map\": {" + map + "}}";
    // A SentencePiece model of a small corpus.
    std::ofstream(dir / "corpus.txt") << "the quick brown fox jumps over the lazy dog, again and again.\n";
    train_sentencepiece({(dir / "corpus.txt").string()}, 300, (dir / "sp").string(), "bpe");
    s.tokenizer_model = slurp(dir / "sp.model");
    // The export's byte-level tokenizer.json made GPT-2's kind: its pattern, three merges, a
    // special token and one that is not (found in the text the cases encode).
    nlohmann::json tj = nlohmann::json::parse(slurp(dir / "hf" / "tokenizer.json"));
    tj["pre_tokenizer"]["use_regex"] = true;
    tj["model"]["vocab"]["\u0120t"] = 256, tj["model"]["vocab"]["he"] = 257, tj["model"]["vocab"]["\u0120the"] = 258;
    tj["model"]["merges"] = {{"\u0120", "t"}, {"h", "e"}, {"\u0120t", "he"}};
    const auto added = [](int id, const char* content, bool special) {
      return nlohmann::json{{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", !special},
                            {"rstrip", !special}, {"normalized", !special}, {"special", special}};
    };
    tj["added_tokens"] = {added(259, "<|endoftext|>", true), added(260, "lazy", false)};
    s.tokenizer_json = tj.dump();
    s.tokenizer_config = nlohmann::json{{"tokenizer_class", "PreTrainedTokenizerFast"}, {"model_max_length", 1024},
                                        {"bos_token", "<|endoftext|>"}, {"eos_token", {{"content", "<|endoftext|>"}}}}
                             .dump();
    std::ofstream(dir / "hf" / "tokenizer.json") << s.tokenizer_json;
    return s;
  }();
  return seed;
}

void run_case(const uint8_t* data, size_t size, const std::string& path) {
  write_bytes(path, data, size);
  try {
    const SafetensorsFile f = read_safetensors(path, "--fuzz");
    for (const SafetensorInfo& t : f.tensors)
      if (t.numel() <= (1 << 20)) t.dtype == "U8" ? void(read_tensor_bytes(f, t)) : void(read_tensor_f32(f, t));
  } catch (const UsageError&) {
  }
  try {
    read_checkpoint_info(path);
  } catch (const UsageError&) {
  }
  try {  // a checkpoint's stored tokenizer, loaded as generate loads it
    if (const std::optional<TokenizerFiles> files = read_checkpoint_tokenizer(path, "--fuzz")) {
      const auto tok = load_tokenizer_files(*files, "stored in the case", "--fuzz");
      tok->decode(tok->encode("the lazy dog"));
    }
  } catch (const UsageError&) {
  }
  try {
    const TokenFile t(path, 50304, "--fuzz");
    int32_t token = 0;
    for (int64_t i = 0; i < t.size(); i += 97) t.read(i, 1, &token);
  } catch (const UsageError&) {
  }
  try {  // as a text corpus (or a token file, when it starts with their magic)
    auto d = make_data_source(path, is_token_file(path) ? 50304 : 256, 2, 7, 1);
    Batch b;
    for (int i = 0; i < 3; ++i) d->next_batch(b);
    for (int64_t w = 0; w < d->all_validation_windows(); w += 2)
      d->validation_windows_batch(w, int(std::min<int64_t>(2, d->all_validation_windows() - w)), b);
  } catch (const UsageError&) {
  }
  try {  // as a tokenizer: a SentencePiece model or a tokenizer.json
    const auto tok = Tokenizer::load(path, "--fuzz");
    tok->decode(tok->encode("the lazy dog \xc3\xa9"));
  } catch (const UsageError&) {
  }
  try {  // as a prompts file
    read_input_file(path, "--fuzz", size_t(64) << 20);
  } catch (const UsageError&) {
  }
  try {  // as a multiple-choice task file
    const Task task = load_task(path, *Tokenizer::load("bytes", "--fuzz"), "--fuzz");
    check_task_fits(task, 64);
  } catch (const UsageError&) {
  }
  if (size % 8 == 0) {  // as JSON lines to tokenize (an eighth of the cases: it writes shards)
    const std::string jsonl = path + ".jsonl", out = path + ".tokens";
    write_bytes(jsonl, data, size);
    try {
      std::ostringstream log;
      run_tokenize(TokenizeOptions{"bytes", out, {jsonl}}, log);
    } catch (const UsageError&) {
    }
    std::error_code ec;
    fs::remove_all(out, ec);
    fs::remove(jsonl, ec);
  }
  // As the tokenizer_config.json beside a tokenizer.json (in the Hugging Face directory).
  const HfSeed& seed = hf_seed();
  const fs::path tokenizer_config = fs::path(seed.dir) / "tokenizer_config.json";
  write_bytes(tokenizer_config, data, size);
  try {
    const auto tok = Tokenizer::load((fs::path(seed.dir) / "tokenizer.json").string(), "--fuzz");
    tok->decode(tok->encode("the lazy dog"));
  } catch (const UsageError&) {
  }
  fs::remove(tokenizer_config);
  // As a Hugging Face directory's config.json, then as its model.safetensors.index.json.
  const fs::path config = fs::path(seed.dir) / "config.json", index = fs::path(seed.dir) / "model.safetensors.index.json";
  write_bytes(config, data, size);
  try {
    int context = 0;
    hf_model_config(seed.dir, "--fuzz", &context);
  } catch (const UsageError&) {
  }
  std::ofstream(config, std::ios::trunc) << seed.config;
  write_bytes(index, data, size);
  try {
    import_hf(seed.dir, hf_model());
  } catch (const UsageError&) {
  }
}

}  // namespace tt::fuzz
