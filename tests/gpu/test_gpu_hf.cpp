// The export through Hugging Face transformers itself (on the GPU machine, where PyTorch and
// transformers are installed; skipped with a message where they are not): the exported
// directory loads as LlamaForCausalLM and computes our logits on a fixed batch (fp32: relative
// error <= 1e-5; bf16 weights: <= 2e-2), its greedy continuation is ours (fp32), and its
// tokenizer encodes a sentence to our ids, for a byte-level model, a SentencePiece one and one
// with a byte-level BPE tokenizer.json. And the byte-level BPE reader's ids against the
// tokenizers library's, on GPT-2's and LLaMA-3's kinds of tokenizer, for every code point.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/tokenize.h"
#include "data/tokenizer.h"
#include "gpu_harness.h"
#include "python_checks.h"
#include "run_outputs.h"
#include "model/generate.h"
#include "model/llama.h"
#include "train/checkpoint.h"
#include "train/hf.h"
#include "train/trainer.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;

struct HfCase {
  const char* name;
  TokenizerCase tokenizer;
  const char* dtype;
  bool tied = true;  // false: an output head of its own (lm_head.weight, tie_word_embeddings false)
};

class GpuHf : public ::testing::TestWithParam<HfCase> {
 protected:
  void SetUp() override {
    REQUIRE_GPU();
    if (!have_transformers()) GTEST_SKIP() << "python3 with torch and transformers is not installed here";
  }
  ScratchDir scratch_{"gpu_hf"};
  const fs::path dir = scratch_.path();
};

TEST_P(GpuHf, TransformersComputesWhatWeCompute) {
  const HfCase& k = GetParam();
  std::string text;
  for (int i = 0; i < 300; ++i) text += "the quick brown fox jumps over the lazy dog, " + std::to_string(i % 7) + "\n";
  std::ofstream(dir / "corpus.txt") << text;
  TrainOptions o;
  o.model.hidden = 64, o.model.layers = 2, o.model.heads = 4, o.model.kv_heads = 2, o.model.intermediate = 128;
  o.model.tie_embeddings = k.tied;
  o.batch = 4, o.seq_len = 32, o.steps = 30, o.timing_warmup = 0, o.log_every = 100, o.learning_rate = 3e-3;
  o.backend.device = DeviceKind::Cuda;
  o.backend.plan = plan_for_version(3);
  std::string tokenizer = "bytes";
  if (k.tokenizer == TokenizerCase::Gpt2Bpe) {  // trained by the tokenizers library
    ASSERT_EQ(bpe_check("train " + (dir / "corpus.txt").string() + " " + (dir / "bpe").string() + " gpt2", dir / "train.log"), 0)
        << read_text(dir / "train.log");
    tokenizer = (dir / "bpe" / "tokenizer.json").string();
  } else if (k.tokenizer == TokenizerCase::SentencePiece) {
    TokenizerTrainOptions t{{(dir / "corpus.txt").string()}, 300, (dir / "sp").string(), "bpe"};
    std::ostringstream log;
    run_tokenizer_train(t, log);
    tokenizer = (dir / "sp.model").string();
  }
  if (tokenizer != "bytes") {
    std::ostringstream log;
    run_tokenize({tokenizer, (dir / "tokens").string(), {(dir / "corpus.txt").string()}, 0.1, 100000}, log);
    o.data = (dir / "tokens" / "*.bin").string();
    o.model.vocab_size = Tokenizer::load(tokenizer, "test")->vocab_size();
  } else {
    o.data = (dir / "corpus.txt").string();
    o.model.vocab_size = 256;
  }
  o.save_path = (dir / "m.safetensors").string();
  std::ostringstream log;
  train(o, log);
  export_hf({o.save_path, (dir / "hf").string(), k.dtype, tokenizer}, log);

  // Our logits of a fixed batch, in double on the CPU, and our greedy continuation.
  const std::unique_ptr<Tokenizer> tok = Tokenizer::load(tokenizer, "test");
  std::vector<int32_t> tokens = tok->encode("the lazy dog jumps over the quick");
  tokens.resize(std::min<size_t>(tokens.size(), 16));
  auto cpu = make_cpu_backend_f64();
  Llama full(o.model, *cpu, 1, int(tokens.size()));
  load_checkpoint(o.save_path, full);
  std::vector<int32_t> targets(tokens.size(), 0);
  full.set_batch(tokens.data(), targets.data());
  full.forward(Llama::Pass::Eval);
  const std::vector<double> all = full.read(full.logits());
  nlohmann::json logits = nlohmann::json::array();
  for (size_t t = 0; t < tokens.size(); ++t)
    logits.push_back(std::vector<double>(all.begin() + int64_t(t) * full.padded_vocab(),
                                         all.begin() + int64_t(t) * full.padded_vocab() + o.model.vocab_size));
  Llama one(o.model, *cpu, 1, 1);
  load_checkpoint(o.save_path, one);
  Generator gen(one, 32);
  std::vector<float> next;
  for (int32_t t : tokens) next = gen.step(t);
  std::vector<int32_t> greedy;
  SamplingOptions g;
  g.temperature = 0;
  for (int i = 0; i < 8; ++i) {
    greedy.push_back(choose_token(next, g, CounterRng(1, kStreamSampling), 0));
    next = gen.step(greedy.back());
  }
  // Sentences with spaces where SentencePiece is particular: leading, doubled, trailing, tabs and
  // newlines, digits, a character it has not seen (byte fallback), and a corpus's text.
  const std::vector<std::string> sentences = {"The fox, 42 times!", " leading space", "two  spaces\tand a tab\n\nlines ",
                                              "caf\xc3\xa9 \xe2\x82\xac 3.14", text.substr(0, 400)};
  std::vector<std::vector<int32_t>> sentence_ids;
  for (const std::string& s : sentences) {
    std::vector<int32_t> ids = tok->encode(s);
    if (k.tokenizer == TokenizerCase::SentencePiece) ids.insert(ids.begin(), tok->bos());  // its post-processor's
    sentence_ids.push_back(ids);
  }
  const bool bf16 = std::string(k.dtype) == "bf16";
  const nlohmann::json expected = {{"tokens", tokens}, {"logits", logits}, {"tolerance", bf16 ? 2e-2 : 1e-5},
                                   {"prompt", tokens}, {"greedy", bf16 ? nlohmann::json::array() : nlohmann::json(greedy)},
                                   {"sentences", sentences}, {"sentence_ids", sentence_ids}};
  std::ofstream(dir / "expected.json") << expected.dump();
  const std::string cmd = "python3 " + std::string(TT_TESTS_DIR) + "/gpu/hf_check.py " + (dir / "hf").string() + " " +
                          (dir / "expected.json").string() + " > " + (dir / "check.log").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream check(dir / "check.log");
  const std::string out((std::istreambuf_iterator<char>(check)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << out;
  std::cout << out;
}

const HfCase kCases[] = {{"bytes_fp32", TokenizerCase::Bytes, "fp32"},
                         {"bytes_bf16", TokenizerCase::Bytes, "bf16"},
                         {"sentencepiece_fp32", TokenizerCase::SentencePiece, "fp32"},
                         {"sentencepiece_bf16", TokenizerCase::SentencePiece, "bf16"},
                         {"untied_sentencepiece_fp32", TokenizerCase::SentencePiece, "fp32", false},
                         {"gpt2_bpe_fp32", TokenizerCase::Gpt2Bpe, "fp32"}};
INSTANTIATE_TEST_SUITE_P(Exports, GpuHf, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// Texts where the patterns are particular: contractions in any case (and the long s, which
// LLaMA-3's case-blind contractions take for s), digits of several scripts, runs of spaces, tabs,
// line breaks, no-break and ideographic spaces before words and at the end, punctuation runs,
// combining marks, emoji, and mixed scripts; then every code point of planes 0-3 and 14 and a
// sample of the others, each between letters, digits, spaces and an apostrophe.
std::vector<std::string> bpe_texts(const std::string& corpus) {
  std::vector<std::string> texts = {
      "Hello world", "I'm here's don't DON'T They'RE we'Ve I'LL he'D it'S '\u017f '\u017ft",
      "12345 1.5e10 \u0661\u0662\u0663\u0664 \u00bd\u2167 x2y3",
      "  two  spaces\tand a tab\n\nlines \r\n crlf\r\r\n  \n ",
      "no\u00a0break \u3000ideographic\u2003em \u0085nel\u000bvt\u000cff end  ",
      "!!! ... ,,, --- ===\n\n(((a))) [b] {c} <d> \"e\" 'f' `g`",
      "e\u0301 n\u0303 \u0915\u093f \u05e9\u05b8\u05dc \U0001F600\U0001F44D\U0001F3FD \u4e2d\u6587\u5b57 \u0645\u0631\u062d\u0628\u0627",
      "caf\u00e9 na\u00efve \u00c5ngstr\u00f6m \u0130stanbul \u03a3\u03bf\u03c6\u03af\u03b1 \u041c\u043e\u0441\u043a\u0432\u0430",
      " leading", "trailing ", "\n", " ", "", corpus};
  const auto utf8 = [](char32_t c) {
    std::string s;
    if (c < 0x80) {
      s += char(c);
    } else if (c < 0x800) {
      s += char(0xC0 | (c >> 6)), s += char(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      s += char(0xE0 | (c >> 12)), s += char(0x80 | ((c >> 6) & 0x3F)), s += char(0x80 | (c & 0x3F));
    } else {
      s += char(0xF0 | (c >> 18)), s += char(0x80 | ((c >> 12) & 0x3F)), s += char(0x80 | ((c >> 6) & 0x3F));
      s += char(0x80 | (c & 0x3F));
    }
    return s;
  };
  std::string chunk;
  for (char32_t c = 1; c <= 0x10FFFF; ++c) {
    if ((c >= 0xD800 && c <= 0xDFFF) || (c >= 0x40000 && c < 0xE0000 && c % 97) || (c >= 0xF0000 && c % 97)) continue;
    const std::string x = utf8(c);
    chunk += "a" + x + "1" + x + " " + x + "'" + x + x + "\n";
    if (chunk.size() > 60000) texts.push_back(chunk), chunk.clear();
  }
  texts.push_back(chunk);
  return texts;
}

// Our ids for every text against the tokenizers library's: a GPT-2-style and a LLaMA-3-style
// tokenizer trained by the library on a corpus, and the real tokenizer.json files in
// data/hf-tokenizers/*/ where the run brings them (GPT-2's: scripts/gpu-check.sh's `hf`).
TEST(HfTokenizers, ByteLevelBpeEncodesAsTheTokenizersLibrary) {
  if (std::system("python3 -c 'import tokenizers' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 with the tokenizers library is not installed here";
  const ScratchDir scratch("bpe");
  const fs::path& dir = scratch.path();
  std::string corpus;
  for (int i = 0; i < 400; ++i)
    corpus += "The quick brown fox's 12 jumps over the lazy dog's 345 naps; she'll say \"it's\" and they'RE off!\n"
              "Caf\u00e9 \u4e2d\u6587 line " + std::to_string(i * 7919) + "\t\ttabs   and  spaces\r\n";
  std::ofstream(dir / "corpus.txt", std::ios::binary) << corpus;
  std::vector<fs::path> files;
  for (const char* family : {"gpt2", "llama3"}) {
    ASSERT_EQ(bpe_check("train " + (dir / "corpus.txt").string() + " " + (dir / family).string() + " " + family,
                        dir / "train.log"), 0)
        << read_text(dir / "train.log");
    files.push_back(dir / family / "tokenizer.json");
  }
  const fs::path real = fs::path(TT_TESTS_DIR) / ".." / "data" / "hf-tokenizers";
  if (fs::is_directory(real))
    for (const auto& e : fs::directory_iterator(real))
      if (fs::exists(e.path() / "tokenizer.json")) files.push_back(e.path() / "tokenizer.json");
  const std::vector<std::string> texts = bpe_texts(corpus);
  std::ofstream(dir / "texts.json") << nlohmann::json(texts).dump();
  for (const fs::path& file : files) {
    const std::unique_ptr<Tokenizer> tok = Tokenizer::load(file.string(), "test");
    ASSERT_EQ(bpe_check("encode " + file.string() + " " + (dir / "texts.json").string() + " " + (dir / "ids.json").string(),
                        dir / "encode.log"), 0)
        << read_text(dir / "encode.log");
    std::ifstream in(dir / "ids.json");
    const nlohmann::json theirs = nlohmann::json::parse(in);
    size_t tokens = 0, differing = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::vector<int32_t> ours = tok->encode(texts[i]), want = theirs[i].get<std::vector<int32_t>>();
      tokens += want.size();
      if (ours != want && ++differing <= 3) {
        size_t at = 0;
        while (at < std::min(ours.size(), want.size()) && ours[at] == want[at]) ++at;
        ADD_FAILURE() << file << ": text " << i << " differs at token " << at << " of " << want.size() << ": ours "
                      << (at < ours.size() ? ours[at] : -1) << " (" << tok->decode({at < ours.size() ? ours[at] : 0})
                      << "), tokenizers " << (at < want.size() ? want[at] : -1) << " ("
                      << tok->decode({at < want.size() ? want[at] : 0}) << ")";
      }
      EXPECT_EQ(tok->decode(ours), texts[i]);
    }
    std::cout << file.parent_path().filename().string() << ": " << tok->describe() << ": " << texts.size() << " texts, "
              << tokens << " tokens, " << differing << " differing\n";
    EXPECT_EQ(differing, 0u);
  }
}

}  // namespace
}  // namespace tt::test
