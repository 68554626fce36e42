// The export through Hugging Face transformers itself (on the GPU machine, where PyTorch and
// transformers are installed; skipped with a message where they are not): the exported
// directory loads as LlamaForCausalLM and computes our logits on a fixed batch (fp32: relative
// error <= 1e-5; bf16 weights: <= 2e-2), its greedy continuation is ours (fp32), and its
// tokenizer encodes sentences to our ids (BOS first where tokenize puts it first in a document)
// and pads with EOS, for a byte-level model, SentencePiece BPE and unigram ones, and ones with a
// GPT-2-style and a LLaMA-3-style byte-level BPE tokenizer.json. (The tokenizers alone against the tokenizers library:
// tests/gpu/test_gpu_tokenizers.cpp.)
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/tokenize.h"
#include "data/tokenizer.h"
#include "data/tokenizer_train.h"
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
  if (k.tokenizer == TokenizerCase::Gpt2Bpe || k.tokenizer == TokenizerCase::Llama3Bpe) {  // trained by the tokenizers library
    const std::string family = k.tokenizer == TokenizerCase::Gpt2Bpe ? "gpt2" : "llama3";
    ASSERT_EQ(bpe_check("train " + (dir / "corpus.txt").string() + " " + (dir / "bpe").string() + " " + family,
                        dir / "train.log"), 0)
        << read_text(dir / "train.log");
    tokenizer = (dir / "bpe" / "tokenizer.json").string();
  } else if (k.tokenizer == TokenizerCase::SentencePiece || k.tokenizer == TokenizerCase::SentencePieceUnigram) {
    TokenizerTrainOptions t{{(dir / "corpus.txt").string()}, 300, (dir / "sp").string(),
                            k.tokenizer == TokenizerCase::SentencePiece ? "bpe" : "unigram"};
    std::ostringstream log;
    run_tokenizer_train(t, log);
    tokenizer = (dir / "sp.model").string();
  }
  use_corpus(o, tokenizer, dir);
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
  // newlines, digits, a character it has not seen (byte fallback), and a corpus's text longer
  // than the training sequence (transformers sets no length limit: it does not warn).
  const std::vector<std::string> sentences = {"The fox, 42 times!", " leading space", "two  spaces\tand a tab\n\nlines ",
                                              "caf\xc3\xa9 \xe2\x82\xac 3.14", "his history", "Hello, world.",
                                              text.substr(0, 400)};
  std::vector<std::vector<int32_t>> sentence_ids;
  for (const std::string& s : sentences) {
    std::vector<int32_t> ids = tok->encode(s);
    if (document_start(*tok) >= 0) ids.insert(ids.begin(), document_start(*tok));  // as tokenize starts a document
    sentence_ids.push_back(ids);
  }
  const bool bf16 = std::string(k.dtype) == "bf16";
  const nlohmann::json expected = {{"tokens", tokens}, {"logits", logits}, {"tolerance", bf16 ? 2e-2 : 1e-5},
                                   {"prompt", tokens}, {"greedy", bf16 ? nlohmann::json::array() : nlohmann::json(greedy)},
                                   {"sentences", sentences}, {"sentence_ids", sentence_ids},
                                   {"pad_token", tok->eos() >= 0 ? nlohmann::json(tok->special_name(tok->eos())) : nlohmann::json()}};
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
                         {"sentencepiece_unigram_fp32", TokenizerCase::SentencePieceUnigram, "fp32"},
                         {"gpt2_bpe_fp32", TokenizerCase::Gpt2Bpe, "fp32"},
                         {"llama3_bpe_fp32", TokenizerCase::Llama3Bpe, "fp32"}};
INSTANTIATE_TEST_SUITE_P(Exports, GpuHf, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tt::test
