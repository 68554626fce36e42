// Export to and import from Hugging Face's LLaMA layout: the RoPE permutation computes the same
// scores, the round trip export -> import is exact, the directory holds what transformers
// reads, and a directory of another shape or with an untied head is refused. (That transformers
// loads it and computes our logits is the GPU machine's test: tests/gpu/test_gpu_hf.cpp.)
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cpu/gradcheck.h"
#include "data/safetensors.h"
#include "data/sentencepiece_json.h"
#include "data/tokenizer.h"
#include "data/tokenizer_files.h"
#include "data/tokenizer_train.h"
#include "model/llama.h"
#include "train/checkpoint.h"
#include "train/hf.h"
#include "run_outputs.h"
#include "train/trainer.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;

// Our RoPE on interleaved pairs of q and k, against transformers' on halves of the permuted
// vectors: the same score q.k at every pair of positions.
TEST(Hf, RopePermutationKeepsTheScores) {
  const int d = 8, heads = 1;
  Random r(3);
  const std::vector<double> q0 = r.uniform(d), k0 = r.uniform(d);
  auto ours = [&](std::vector<double> v, int pos) {
    for (int i = 0; i < d / 2; ++i) {
      const double a = pos * std::pow(10000.0, -2.0 * i / d), x0 = v[size_t(2 * i)], x1 = v[size_t(2 * i + 1)];
      v[size_t(2 * i)] = x0 * std::cos(a) - x1 * std::sin(a);
      v[size_t(2 * i + 1)] = x0 * std::sin(a) + x1 * std::cos(a);
    }
    return v;
  };
  auto theirs = [&](std::vector<double> v, int pos) {  // rotate_half: (x[i], x[i + d/2])
    for (int i = 0; i < d / 2; ++i) {
      const double a = pos * std::pow(10000.0, -2.0 * i / d), x0 = v[size_t(i)], x1 = v[size_t(i + d / 2)];
      v[size_t(i)] = x0 * std::cos(a) - x1 * std::sin(a);
      v[size_t(i + d / 2)] = x1 * std::cos(a) + x0 * std::sin(a);
    }
    return v;
  };
  auto permuted = [&](const std::vector<double>& v) {  // a projection row per element
    std::vector<float> rows(v.begin(), v.end());
    rope_rows_to_hf(rows, heads, d, 1);
    std::vector<float> back = rows;
    rope_rows_from_hf(back, heads, d, 1);
    EXPECT_EQ(back, std::vector<float>(v.begin(), v.end())) << "the inverse undoes it";
    return std::vector<double>(rows.begin(), rows.end());
  };
  auto dot = [](const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
  };
  const std::vector<double> qh = permuted(q0), kh = permuted(k0);
  for (int pq : {0, 1, 5, 37})
    for (int pk : {0, 3, 37})
      EXPECT_NEAR(dot(ours(q0, pq), ours(k0, pk)), dot(theirs(qh, pq), theirs(kh, pk)), 1e-6) << pq << " " << pk;
}

class HfExport : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir / "text.txt") << std::string(300, 'a') + "the quick brown fox jumps over the lazy dog ";
    o.data = (dir / "text.txt").string();
    o.model.vocab_size = 256, o.model.hidden = 32, o.model.layers = 2, o.model.heads = 4, o.model.kv_heads = 2;
    o.model.intermediate = 48;
    o.batch = 2, o.seq_len = 16, o.steps = 2, o.timing_warmup = 0, o.log_every = 100;
    o.backend.device = DeviceKind::Cpu;
    o.save_path = (dir / "m.safetensors").string();
    std::ostringstream log;
    train(o, log);
  }
  std::string exported(const std::string& name, const std::string& dtype, const std::string& ckpt) {
    std::ostringstream log;
    export_hf({ckpt, (dir / name).string(), dtype, ""}, log);
    return (dir / name).string();
  }
  static std::string bytes(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  TrainOptions o;
  ScratchDir scratch_{"hf"};
  const fs::path dir = scratch_.path();
};

TEST_F(HfExport, TheDirectoryHoldsWhatTransformersReads) {
  const fs::path hf = exported("hf", "bf16", o.save_path);
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(fs::exists(hf / f)) << f;
  const nlohmann::json cfg = nlohmann::json::parse(bytes(hf / "config.json"));
  EXPECT_EQ(cfg["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(cfg["tie_word_embeddings"], true);
  EXPECT_EQ(cfg["vocab_size"], 256);
  EXPECT_EQ(cfg["num_key_value_heads"], 2);
  EXPECT_EQ(cfg["head_dim"], 8);
  EXPECT_EQ(cfg["rms_norm_eps"], 1e-5);
  EXPECT_EQ(cfg["rope_theta"], 10000.0);
  EXPECT_EQ(cfg["max_position_embeddings"], 16);
  const SafetensorsFile f = read_safetensors((hf / "model.safetensors").string(), "test");
  EXPECT_EQ(f.tensors.size(), size_t(2 * 9 + 2)) << "no lm_head: it is the embedding";
  EXPECT_EQ(f.find("lm_head.weight"), nullptr);
  ASSERT_NE(f.find("model.embed_tokens.weight"), nullptr);
  EXPECT_EQ(f.find("model.embed_tokens.weight")->shape, (std::vector<int64_t>{256, 32}));
  EXPECT_EQ(f.find("model.layers.1.self_attn.k_proj.weight")->dtype, "BF16");
  // Byte tokens through transformers' byte-level map: byte b is token b.
  const nlohmann::json tok = nlohmann::json::parse(bytes(hf / "tokenizer.json"));
  EXPECT_EQ(tok["model"]["vocab"].size(), 256u);
  EXPECT_EQ(tok["model"]["vocab"]["a"], 97);
  EXPECT_EQ(tok["model"]["vocab"]["\xc4\x8a"], 10) << "newline is U+010A in the byte-level alphabet";
}

// A SentencePiece model exports as its kind: a unigram model as a Unigram model (each piece with
// its score, byte fallback; the pieces SentencePiece never takes for text scored below any
// spelling of their text in normal pieces), a BPE model as BPE merges; both with BOS first where
// tokenize puts it (add_bos_token, the post-processor), EOS padding and no length limit. (That
// the tokenizers library then encodes as SentencePiece, on every code point:
// tests/gpu/test_gpu_tokenizers.cpp.)
TEST_F(HfExport, SentencePieceModelsExportAsTheirKind) {
  std::string corpus;
  for (int i = 0; i < 200; ++i) corpus += "his history is this: the quick brown fox jumps over the lazy dog " + std::to_string(i) + "\n";
  std::ofstream(dir / "corpus.txt") << corpus;
  for (const std::string type : {"unigram", "bpe"}) {
    train_sentencepiece({(dir / "corpus.txt").string()}, 300, (dir / type).string(), type);
    const std::unique_ptr<Tokenizer> sp = Tokenizer::load((dir / (type + ".model")).string(), "test");
    TrainOptions t = o;
    t.data = "synthetic", t.model.vocab_size = sp->vocab_size(), t.save_path = (dir / (type + ".safetensors")).string();
    std::ostringstream log;
    train(t, log);
    export_hf({t.save_path, (dir / (type + "-hf")).string(), "fp32", (dir / (type + ".model")).string()}, log);
    const nlohmann::json tok = nlohmann::json::parse(bytes(dir / (type + "-hf") / "tokenizer.json"));
    const nlohmann::json& model = tok["model"];
    if (type == "bpe") {
      EXPECT_EQ(model["type"], "BPE");
      EXPECT_FALSE(model["merges"].empty());
    } else {
      EXPECT_EQ(model["type"], "Unigram");
      EXPECT_EQ(model["unk_id"], 0);
      EXPECT_EQ(model["byte_fallback"], true);
      ASSERT_EQ(model["vocab"].size(), size_t(sp->vocab_size()));
      double lowest = 0;
      std::ifstream scores(dir / (type + ".vocab"));  // SentencePiece's: a piece and its score a line
      std::string line;
      for (int id = 0; std::getline(scores, line); ++id) {
        const std::string piece = line.substr(0, line.find('\t'));
        EXPECT_EQ(model["vocab"][size_t(id)][0], piece);
        if (id >= 3 && id < 259) continue;  // the byte pieces: <0x00> ... <0xFF>
        if (id >= 3) lowest = std::min(lowest, model["vocab"][size_t(id)][1].get<double>());
        if (id >= 3) EXPECT_NEAR(model["vocab"][size_t(id)][1].get<double>(), std::stod(line.substr(piece.size() + 1)), 1e-5);
      }
      for (int id : {0, 1, 2, 3, 258})  // <unk> <s> </s> <0x00> <0xFF>: below 6 pieces of the lowest score
        EXPECT_LT(model["vocab"][size_t(id)][1].get<double>(), 6 * lowest) << model["vocab"][size_t(id)];
      const std::vector<int32_t> his = sp->encode("his");
      ASSERT_EQ(his.size(), 1u) << "a unigram model spells it as one piece (transformers spelt the BPE export's \u2581 h is)";
      EXPECT_EQ(model["vocab"][size_t(his[0])][0], "\u2581his");
    }
    EXPECT_EQ(tok["post_processor"]["single"][0]["SpecialToken"]["id"], "<s>");
    const nlohmann::json config = nlohmann::json::parse(bytes(dir / (type + "-hf") / "tokenizer_config.json"));
    EXPECT_EQ(config["add_bos_token"], true);
    EXPECT_EQ(config["pad_token"], "</s>");
    EXPECT_FALSE(config.contains("model_max_length"));
    EXPECT_EQ(nlohmann::json::parse(bytes(dir / (type + "-hf") / "config.json"))["pad_token_id"], 2);
  }
}

// The tokenizer.json a SentencePiece model exports as reads back as that model: the same ids for
// every text (spaces, newlines, digits, characters it never saw, special tokens' text), the same
// BOS, EOS and decoding, and the same file when exported again; through the binary, tokenize
// makes the same shards from either file. A tokenizer.json of another form is refused naming
// the field.
TEST_F(HfExport, SentencePieceTokenizerJsonReadsBack) {
  std::string corpus;
  for (int i = 0; i < 200; ++i) corpus += "his history is this: the quick brown fox jumps over the lazy dog " + std::to_string(i) + "\n";
  std::ofstream(dir / "corpus.txt") << corpus;
  std::vector<std::string> texts = {corpus, " leading", "  two  spaces\n\nand a tab\t! ", "trailing ", "", " ", "x",
                                    "caf\xc3\xa9 \xe2\x82\xac 12345 zq", "<s> </s> <unk> <0x41> \xe2\x96\x81his"};
  std::string every;  // a code point in 61 of every kind, from 1 to past the last plane
  for (char32_t c = 1; c < 0x110000; c += 61) {
    if (c >= 0xD800 && c < 0xE000) continue;
    every += c < 0x80 ? std::string(1, char(c))
             : c < 0x800 ? std::string{char(0xC0 | (c >> 6)), char(0x80 | (c & 0x3F))}
             : c < 0x10000 ? std::string{char(0xE0 | (c >> 12)), char(0x80 | ((c >> 6) & 0x3F)), char(0x80 | (c & 0x3F))}
                           : std::string{char(0xF0 | (c >> 18)), char(0x80 | ((c >> 12) & 0x3F)),
                                         char(0x80 | ((c >> 6) & 0x3F)), char(0x80 | (c & 0x3F))};
  }
  texts.push_back(every);
  for (const std::string type : {"bpe", "unigram"}) {
    train_sentencepiece({(dir / "corpus.txt").string()}, 300, (dir / type).string(), type);
    const std::string model = (dir / (type + ".model")).string(), file = (dir / (type + ".json")).string();
    const std::string exported = sentencepiece_tokenizer_json(model);
    std::ofstream(file, std::ios::binary) << exported;
    const std::unique_ptr<Tokenizer> sp = Tokenizer::load(model, "test"), back = Tokenizer::load(file, "test");
    EXPECT_EQ(back->kind(), TokenizerKind::SentencePiece);
    ASSERT_EQ(back->vocab_size(), sp->vocab_size()) << type;
    EXPECT_EQ(back->bos(), sp->bos());
    EXPECT_EQ(back->eos(), sp->eos());
    for (int id = 0; id < sp->vocab_size(); ++id) EXPECT_EQ(back->special_name(id), sp->special_name(id));
    for (const std::string& text : texts) {
      EXPECT_EQ(back->encode(text), sp->encode(text)) << type << ": " << text.substr(0, 60);
      EXPECT_EQ(back->encode_more(text), sp->encode_more(text)) << type << ": " << text.substr(0, 60);
      EXPECT_EQ(back->decode(sp->encode(text)), sp->decode(sp->encode(text))) << type;
    }
    std::ofstream(dir / (type + "-again.model"), std::ios::binary) << sentencepiece_model(*back);
    EXPECT_EQ(sentencepiece_tokenizer_json((dir / (type + "-again.model")).string()), exported) << type << ": exported again";

    const std::string shards_of_model = (dir / (type + "-m")).string(), shards_of_json = (dir / (type + "-j")).string();
    for (const auto& [tok, out] : {std::pair{model, shards_of_model}, {file, shards_of_json}}) {
      const Outcome r = run_binary("tokenize --val-fraction 0 --tokenizer " + tok + " --out " + out + " " +
                                   (dir / "corpus.txt").string(), dir);
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    EXPECT_EQ(bytes(fs::path(shards_of_json) / "train_000000.bin"), bytes(fs::path(shards_of_model) / "train_000000.bin"));

    // The two files are one tokenizer: a run on the .model's shards takes the tokenizer.json, and
    // generate takes it for the checkpoint that stores the .model (their stored bytes differ).
    EXPECT_NE(tokenizer_files(*back).files, tokenizer_files(*sp).files);
    EXPECT_TRUE(same_tokenizer(tokenizer_files(*back), tokenizer_files(*sp)));
    const std::string data = "--device cpu --data '" + shards_of_model + "/*.bin' --vocab-size 320 --hidden-dim 16 "
                             "--num-layers 1 --num-heads 2 --seq-len 16 --batch-size 2 --num-steps 1 --tokenizer " + file;
    const Outcome trained = run_binary(data + " --save " + (dir / (type + ".st")).string(), dir);
    EXPECT_EQ(trained.exit_code, 0) << trained.err;
    const Outcome generated = run_binary("generate --device cpu " + (dir / (type + ".st")).string() + " --tokenizer " +
                                             file + " --prompt his --max-new-tokens 2", dir);
    EXPECT_EQ(generated.exit_code, 0) << generated.err;
  }
  // Two SentencePiece models that are not one tokenizer stay apart.
  const auto files_of = [&](const std::string& type) {
    return tokenizer_files(*Tokenizer::load((dir / (type + ".model")).string(), "test"));
  };
  EXPECT_FALSE(same_tokenizer(files_of("bpe"), files_of("unigram")));
  const Outcome other = run_binary("--device cpu --data '" + (dir / "bpe-m").string() + "/*.bin' --vocab-size 320 "
                                   "--hidden-dim 16 --num-layers 1 --num-heads 2 --seq-len 16 --batch-size 2 "
                                   "--num-steps 1 --tokenizer " + (dir / "unigram.json").string(), dir);
  EXPECT_EQ(other.exit_code, 2) << other.err;
  EXPECT_NE(other.err.find("is not the tokenizer that made the data"), std::string::npos) << other.err;
  const nlohmann::json good = nlohmann::json::parse(bytes(dir / "bpe.json"));
  const auto refused = [&](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json j = good;
    change(j);
    std::ofstream(dir / "changed.json", std::ios::binary) << j.dump();
    try {
      Tokenizer::load((dir / "changed.json").string(), "--tokenizer");
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("(loaded)");
  };
  EXPECT_NE(refused([](nlohmann::json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}}; }).find("pre_tokenizer \"Metaspace\" is not read"),
            std::string::npos);
  EXPECT_NE(refused([](nlohmann::json& j) { j["normalizer"] = {{"type", "NFKC"}}; }).find("normalizer \"NFKC\": only SentencePiece's"),
            std::string::npos);
  EXPECT_NE(refused([](nlohmann::json& j) { j["added_tokens"][0]["special"] = false; }).find("is not special"), std::string::npos);
  EXPECT_NE(refused([](nlohmann::json& j) { j["model"]["merges"].push_back({"\xe2\x96\x81his", "zz"}); }).find("model.merges"),
            std::string::npos);
  EXPECT_NE(refused([](nlohmann::json& j) { j["model"]["vocab"]["zz"] = 100000; }).find("is not below"), std::string::npos);
}

// fp32: export, import into a model, save, export again: the same bytes.
TEST_F(HfExport, RoundTripIsExact) {
  const fs::path hf = exported("hf", "fp32", o.save_path);
  const std::vector<float> imported = import_hf(hf.string(), o.model);
  auto be = make_backend({DeviceKind::Cpu, plan_for_version(1)});
  Llama original(o.model, *be, 1, 1);
  load_checkpoint(o.save_path, original);
  EXPECT_EQ(imported, original.read_f32(original.params())) << "the import inverts the export";
  Llama m(o.model, *be, 1, 1);
  m.init_weights(9);
  m.write(m.params(), imported);
  const CheckpointInfo info = read_checkpoint_info(o.save_path);
  save_checkpoint((dir / "again.safetensors").string(), m, info);
  const fs::path hf2 = exported("hf2", "fp32", (dir / "again.safetensors").string());
  EXPECT_EQ(bytes(hf / "model.safetensors"), bytes(hf2 / "model.safetensors"));
  // And training starts from it.
  TrainOptions t = o;
  t.init_from = hf.string();
  t.save_path.clear();
  t.steps = 1;
  std::ostringstream log;
  const TrainResult r = train(t, log);
  EXPECT_NE(log.str().find("Initialized from"), std::string::npos);
  EXPECT_TRUE(std::isfinite(r.final_loss));
}

TEST_F(HfExport, OtherModelsAreRefused) {
  const fs::path hf = exported("hf", "fp32", o.save_path);
  ModelConfig other = o.model;
  other.hidden = 64;
  EXPECT_NE(refusal([&] { import_hf(hf.string(), other); }).find("--hidden-dim"), std::string::npos);
  // A transposed weight (the same count of another shape): refused, naming both shapes.
  const SafetensorsFile f = read_safetensors((hf / "model.safetensors").string(), "test");
  std::vector<TensorOut> tensors;
  for (const SafetensorInfo& t : f.tensors) tensors.push_back({t.name, t.shape, read_tensor_f32(f, t)});
  std::vector<TensorOut> transposed = tensors;
  for (TensorOut& t : transposed)
    if (t.name == "model.layers.0.mlp.gate_proj.weight") std::swap(t.shape[0], t.shape[1]);
  write_safetensors((hf / "model.safetensors").string(), transposed, {}, false);
  EXPECT_NE(refusal([&] { import_hf(hf.string(), o.model); })
                .find("'model.layers.0.mlp.gate_proj.weight' of shape [32, 48] where this model's is [48, 32]"),
            std::string::npos)
      << refusal([&] { import_hf(hf.string(), o.model); });
  // An output head of its own (an untied model): refused.
  TensorOut head = tensors.back();
  head.name = "lm_head.weight";
  for (float& x : head.values) x += 1.0f;
  tensors.push_back(head);
  write_safetensors((hf / "model.safetensors").string(), tensors, {}, false);
  EXPECT_NE(refusal([&] { import_hf(hf.string(), o.model); }).find("lm_head"), std::string::npos);
  nlohmann::json cfg = nlohmann::json::parse(bytes(hf / "config.json"));
  cfg["model_type"] = "mistral";
  std::ofstream(hf / "config.json") << cfg.dump();
  EXPECT_NE(refusal([&] { import_hf(hf.string(), o.model); }).find("not a LLaMA"), std::string::npos);
  EXPECT_NE(refusal([&] { import_hf((dir / "nothing").string(), o.model); }).find("config.json"), std::string::npos);
  // Export: a tokenizer of another vocabulary.
  EXPECT_NE(refusal([&] {
              std::ostringstream log;
              export_hf({o.save_path, (dir / "x").string(), "bf16", "/no/such.model"}, log);
            }).find("--tokenizer"),
            std::string::npos);
}

// --init-from takes the model's shape from where it starts (a checkpoint of --save, or an
// exported directory's config.json) when no flag gives it, and starts from its weights: the
// validation loss at step 0 is the source's at its end (the same data, windows and weights; the
// fp32 export is exact). A shape flag that differs is refused naming the field.
TEST_F(HfExport, InitFromACheckpointOrADirectoryTakesItsShape) {
  const std::string source_log = [&] {
    std::ostringstream log;
    TrainOptions again = o;
    again.save_path.clear();
    again.steps = 1;
    again.init_from = o.save_path;  // a run of 0 steps is refused: 1 step, then read its step-0 validation
    train(again, log);
    return log.str();
  }();
  const fs::path hf = exported("hf32", "fp32", o.save_path);
  for (const std::string& from : {o.save_path, hf.string()}) {
    SCOPED_TRACE(from);
    Outcome r = run_binary("--device cpu --data " + o.data + " --seq-len 16 --batch-size 2 --num-steps 1 --init-from " + from,
                           dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("Tiny LLaMA: "), std::string::npos);
    EXPECT_NE(r.out.find("hidden 32, 2 layers, 4 heads / 2 kv heads of 8, ffn 48"), std::string::npos) << r.out;
    const size_t at = r.out.find("Validation loss at step 0: ");
    ASSERT_NE(at, std::string::npos) << r.out;
    EXPECT_NE(source_log.find(r.out.substr(at, 34)), std::string::npos) << r.out.substr(at, 34) << " vs " << source_log;
  }
  Outcome r = run_binary("--device cpu --data " + o.data + " --seq-len 16 --hidden-dim 64 --num-steps 1 --init-from " + o.save_path,
                         dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--init-from: the checkpoint's model has hidden_dim 32, this run has 64 (set --hidden-dim"),
            std::string::npos) << r.err;
}

// A model with an output head of its own (--no-tie-embeddings): exported with lm_head.weight and
// tie_word_embeddings false, and a LLaMA directory like it (also one whose config.json leaves
// tie_word_embeddings out, transformers' default: untied) fine-tunes from its weights.
TEST_F(HfExport, AnUntiedHeadExportsAndFineTunes) {
  TrainOptions u = o;
  u.model.tie_embeddings = false;
  u.save_path = (dir / "untied.safetensors").string();
  std::ostringstream log;
  train(u, log);
  EXPECT_NE(log.str().find(std::to_string(o.model.param_count() + 256 * 32) + " parameters"), std::string::npos) << log.str();
  const fs::path hf = exported("untied_hf", "fp32", u.save_path);
  const nlohmann::json config = nlohmann::json::parse(bytes(hf / "config.json"));
  EXPECT_EQ(config["tie_word_embeddings"], false);
  EXPECT_NE(read_safetensors((hf / "model.safetensors").string(), "test").find("lm_head.weight"), nullptr);
  u.steps = 3, u.resume_path = u.save_path, u.save_path.clear();
  const std::string resumed = [&] { std::ostringstream l; train(u, l); return l.str(); }();
  const size_t at = resumed.find("Validation loss at step 2: ");
  ASSERT_NE(at, std::string::npos) << resumed;
  nlohmann::json no_key = config;
  no_key.erase("tie_word_embeddings");
  for (bool drop_key : {false, true}) {
    SCOPED_TRACE(drop_key ? "tie_word_embeddings left out" : "tie_word_embeddings false");
    if (drop_key) std::ofstream(hf / "config.json", std::ios::trunc) << no_key.dump();
    Outcome r = run_binary("--device cpu --data " + o.data + " --seq-len 16 --batch-size 2 --num-steps 1 --init-from " +
                               hf.string(),
                           dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const size_t v = r.out.find("Validation loss at step 0: ");
    ASSERT_NE(v, std::string::npos) << r.out;
    EXPECT_EQ(r.out.substr(v + 27, 7), resumed.substr(at + 27, 7)) << "the weights of step 2";
  }
  Outcome r = run_binary("--device cpu --data " + o.data + " --seq-len 16 --num-steps 1 --tie-embeddings --init-from " +
                             hf.string(),
                         dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("has tie_word_embeddings 0 where this run has 1 (set --no-tie-embeddings"), std::string::npos)
      << r.err;
}

// Through the binary: a sharded directory (model.safetensors.index.json and its shards) loads
// in generate and --init-from (reading the index used freed memory and refused every one); a
// FIFO in place of config.json, a config.json that is an array or has a field of the wrong
// type, and a prompts file that is a device are refused with one line, exit code 2, at once.
TEST_F(HfExport, ShardedAndHostileDirectories) {
  const fs::path hf = exported("hf", "fp32", o.save_path);
  const SafetensorsFile f = read_safetensors((hf / "model.safetensors").string(), "test");
  std::vector<TensorOut> first, second;
  nlohmann::json map;
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    const SafetensorInfo& t = f.tensors[i];
    (i % 2 ? second : first).push_back({t.name, t.shape, read_tensor_f32(f, t)});
    map[t.name] = i % 2 ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
  }
  write_safetensors((hf / "model-00001-of-00002.safetensors").string(), first, {}, false);
  write_safetensors((hf / "model-00002-of-00002.safetensors").string(), second, {}, false);
  fs::remove(hf / "model.safetensors");
  std::ofstream(hf / "model.safetensors.index.json") << nlohmann::json{{"metadata", {}}, {"weight_map", map}}.dump();
  Outcome r = run_binary("generate " + hf.string() + " --prompt 'the ' --max-new-tokens 4", dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_binary("--device cpu --data " + o.data + " --hidden-dim 32 --num-layers 2 --num-heads 4 --num-kv-heads 2 "
                 "--intermediate-size 48 --seq-len 16 --batch-size 2 --num-steps 1 --init-from " + hf.string(), dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Initialized from"), std::string::npos) << r.out;

  const std::string config = bytes(hf / "config.json");
  for (const auto& [content, says] : std::vector<std::pair<std::string, std::string>>{
           {"[1, 2, 3]", "is not a JSON object"},
           {"{\"model_type\": \"llama\", \"hidden_act\": 7}", "config.json whose hidden_act is 7, not a string"},
           {"", "is not a regular file"}, {"a directory", "is not a regular file"}}) {
    SCOPED_TRACE(says);
    fs::remove_all(hf / "config.json");
    if (content.empty()) ASSERT_EQ(::mkfifo((hf / "config.json").c_str(), 0600), 0);
    else if (content == "a directory") fs::create_directories(hf / "config.json");
    else std::ofstream(hf / "config.json") << content;
    r = run_binary("generate " + hf.string() + " --prompt 'the '", dir);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
  fs::remove_all(hf / "config.json");
  std::ofstream(hf / "config.json") << config;
  r = run_binary("generate " + hf.string() + " --prompts-file /dev/zero", dir);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--prompts-file: '/dev/zero' is not a regular file"), std::string::npos) << r.err;
}

// export writes its directory whole or not at all: one holding a file no export writes is
// refused and left as it was; an earlier export is replaced entirely (its SentencePiece
// tokenizer.model does not outlive a bytes export: generate reads the new one); a failed export
// creates nothing.
TEST_F(HfExport, TheDirectoryIsWrittenWholeOrNotAtAll) {
  fs::create_directories(dir / "foreign");
  std::ofstream(dir / "foreign" / "config.json") << "{\"mine\": 1}";
  std::ofstream(dir / "foreign" / "notes.txt") << "keep me";
  Outcome r = run_binary("export " + o.save_path + " --hf " + (dir / "foreign").string(), dir);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("holds 'notes.txt', which no export writes"), std::string::npos) << r.err;
  EXPECT_EQ(bytes(dir / "foreign" / "config.json"), "{\"mine\": 1}");
  // An earlier export with a tokenizer.model of its own, then a bytes export over it.
  fs::create_directories(dir / "hf");
  std::ofstream(dir / "hf" / "tokenizer.model") << "an earlier export's SentencePiece model";
  r = run_binary("export " + o.save_path + " --hf " + (dir / "hf").string() + "/", dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir / "hf" / "tokenizer.model")) << "a file of the earlier export was left behind";
  r = run_binary("generate " + (dir / "hf").string() + " --prompt 'the ' --max-new-tokens 3", dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // A failed export (a tokenizer of another vocabulary) leaves no directory.
  r = run_binary("export " + o.save_path + " --hf " + (dir / "new").string() + " --tokenizer " + o.data, dir);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_FALSE(fs::exists(dir / "new"));
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

// The reader of untrusted safetensors files: each malformed header refused, none crashes.
TEST(Safetensors, MalformedFilesAreRefused) {
  const ScratchDir scratch("safetensors");
  const fs::path& dir = scratch.path();
  auto file = [&](const std::string& header, size_t data) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[size_t(i)] = char(uint64_t(header.size()) >> (8 * i));
    s += header + std::string(data, '\0');
    std::ofstream((dir / "f").string(), std::ios::binary) << s;
    try {
      read_safetensors((dir / "f").string(), "--x");
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string deep(200000, '[');
  EXPECT_NE(file(deep, 0).find("has a header that is not JSON this program reads (nested deeper than 8 levels)"), std::string::npos);
  EXPECT_NE(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4).find("byte length"), std::string::npos);
  EXPECT_NE(file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})", 6)
                .find("hole or overlap"),
            std::string::npos);
  EXPECT_NE(file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8).find("no tensor covers"), std::string::npos);
  EXPECT_NE(file(R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8).find("dtype I64"), std::string::npos);
  EXPECT_NE(file(R"({"a":{"dtype":"F32","shape":"x","data_offsets":[0,4]}})", 4).find("array shape"), std::string::npos);
  EXPECT_NE(file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4).find("bad dimension"), std::string::npos);
  EXPECT_NE(file(R"({"__metadata__":{"k":1}})", 0).find("not a string"), std::string::npos);
  EXPECT_NE(file("{not json", 0).find("syntax error"), std::string::npos);
  EXPECT_EQ(file(R"({"a":{"dtype":"BF16","shape":[2,1],"data_offsets":[0,4]}})", 4), "");
}

}  // namespace
}  // namespace tt::test
