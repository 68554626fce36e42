// Generation: the cached decoder computes what the training forward computes over the whole
// sequence, token by token; the choice of tokens (greedy, top-k, top-p, temperature) follows
// its definition and repeats for a seed; bad input through the real binary.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cpu/gradcheck.h"
#include "model/generate.h"
#include "train/checkpoint.h"
#include "run_outputs.h"
#include "train/generation.h"
#include "train/trainer.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 61, c.hidden = 32, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.intermediate = 48;
  return c;
}

// At every position the cached step's logits equal the logits the training forward computes for
// that position of the whole sequence (in double: to rounding).
TEST(Generate, CachedDecodingEqualsRecomputingTheSequence) {
  const ModelConfig c = small_config();
  const int n = 13;
  auto be = make_cpu_backend_f64();
  Llama full(c, *be, 1, n);
  full.init_weights(5);
  std::vector<int32_t> tokens(n), targets(n, 0);
  for (int i = 0; i < n; ++i) tokens[size_t(i)] = (i * 17 + 3) % c.vocab_size;
  full.set_batch(tokens.data(), targets.data());
  full.forward(Llama::Pass::Eval);
  const std::vector<double> ref = full.read(full.logits());  // [n, padded vocab]

  auto be2 = make_cpu_backend_f64();
  Llama one(c, *be2, 1, 1);
  one.init_weights(5);
  Generator gen(one, n);
  for (int i = 0; i < n; ++i) {
    const std::vector<float> logits = gen.step(tokens[size_t(i)]);
    ASSERT_EQ(int(logits.size()), c.vocab_size);
    const std::vector<double> got(logits.begin(), logits.end());
    const std::vector<double> want(ref.begin() + int64_t(i) * full.padded_vocab(),
                                   ref.begin() + int64_t(i) * full.padded_vocab() + c.vocab_size);
    EXPECT_LT(rel_error(got, want), 1e-6) << "position " << i;  // the step returns floats
  }
  EXPECT_EQ(gen.position(), n);
}

// Past the cache's length the window slides: each new token attends over the keys and values of
// the last n positions. With one layer those depend on their own token alone, so this is what
// the model computes over the last n tokens at positions 0..n-1 (RoPE's scores depend on
// distances alone), to rounding in double, and what the window recomputed without a cache gives.
// (With more layers the cached keys of a position also carry what preceded the window: the two
// ways differ there, both attending over n tokens.)
TEST(Generate, PastTheContextTheCacheSlides) {
  ModelConfig c = small_config();
  c.layers = 1;
  const int n = 8, total = 21;
  std::vector<int32_t> tokens(total);
  for (int i = 0; i < total; ++i) tokens[size_t(i)] = (i * 13 + 5) % c.vocab_size;
  auto be = make_cpu_backend_f64();
  Llama one(c, *be, 1, 1), window(c, *be, 1, n), last(c, *be, 1, n);
  for (Llama* m : {&one, &window, &last}) m->init_weights(9);
  Generator gen(one, n, 1, total);
  WindowGenerator slide(window);
  std::vector<int32_t> targets(n, 0);
  for (int i = 0; i < total; ++i) {
    const std::vector<float> cached = gen.step(tokens[size_t(i)]), recomputed = slide.step({tokens[size_t(i)]})[0];
    if (i < n) continue;
    last.set_batch(tokens.data() + i - n + 1, targets.data());  // the last n tokens, at positions 0..n-1
    last.forward(Llama::Pass::Eval);
    const std::vector<double> all = last.read(last.logits());
    const std::vector<double> want(all.begin() + int64_t(n - 1) * last.padded_vocab(),
                                   all.begin() + int64_t(n - 1) * last.padded_vocab() + c.vocab_size);
    EXPECT_LT(rel_error(std::vector<double>(cached.begin(), cached.end()), want), 1e-6) << "position " << i;
    EXPECT_LT(rel_error(std::vector<double>(recomputed.begin(), recomputed.end()), want), 1e-6) << "position " << i;
  }
  EXPECT_THROW(gen.step(tokens[0]), UsageError) << "the positions asked for are used";
}

TEST(Generate, ChoosingTokens) {
  const std::vector<float> logits = {0.1f, 2.0f, 1.9f, -1.0f, 2.0f};
  const CounterRng rng(1, kStreamSampling);
  SamplingOptions greedy;
  greedy.temperature = 0;
  EXPECT_EQ(choose_token(logits, greedy, rng, 0), 1);  // the first of the two largest
  SamplingOptions top1;
  top1.top_k = 1;
  for (uint64_t d = 0; d < 50; ++d) EXPECT_EQ(choose_token(logits, top1, rng, d), 1);
  SamplingOptions nucleus;
  nucleus.top_p = 0.3;  // the most likely token alone holds more than 0.3
  for (uint64_t d = 0; d < 50; ++d) EXPECT_EQ(choose_token(logits, nucleus, rng, d), 1);
  // At temperature 1, the frequencies follow the softmax.
  SamplingOptions plain;
  plain.temperature = 1.0;
  std::vector<int> counts(logits.size());
  const int draws = 20000;
  for (int d = 0; d < draws; ++d) ++counts[size_t(choose_token(logits, plain, rng, uint64_t(d)))];
  double z = 0;
  for (float l : logits) z += std::exp(double(l));
  for (size_t i = 0; i < logits.size(); ++i)
    EXPECT_NEAR(counts[i] / double(draws), std::exp(double(logits[i])) / z, 0.015) << "token " << i;
  // The same draw, the same token.
  EXPECT_EQ(choose_token(logits, plain, rng, 77), choose_token(logits, plain, rng, 77));
}

TEST(Generate, Utf8IsNeverSplit) {
  EXPECT_EQ(complete_utf8("abc"), 3u);
  EXPECT_EQ(complete_utf8("ab\xc3"), 2u);              // the first byte of a 2-byte character
  EXPECT_EQ(complete_utf8("ab\xc3\xa9"), 4u);          // complete
  EXPECT_EQ(complete_utf8("a\xe2\x82"), 1u);           // 2 of 3 bytes
  EXPECT_EQ(complete_utf8("a\xe2\x82\xac"), 4u);
  EXPECT_EQ(complete_utf8("a\xf0\x9f\x98"), 1u);       // 3 of 4
  EXPECT_EQ(complete_utf8(""), 0u);
}

class GenerateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    // A byte-level model trained a few steps on a text file, seq-len 16: its context.
    std::ofstream(dir / "text.txt") << std::string(400, 'a') + "hello world, hello tokens. ";
    TrainOptions o;
    o.data = (dir / "text.txt").string();
    o.model = small_config();
    o.model.vocab_size = 256;
    o.batch = 2, o.seq_len = 16, o.steps = 3, o.timing_warmup = 0, o.log_every = 100;
    o.backend.device = DeviceKind::Cpu;
    o.save_path = (dir / "m.safetensors").string();
    std::ostringstream log;
    train(o, log);
  }
  Outcome run(const std::string& args) { return run_binary("generate " + args, dir); }
  std::string ckpt() const { return (dir / "m.safetensors").string(); }
  ScratchDir scratch_{"gen"};
  const fs::path dir = scratch_.path();
};

TEST_F(GenerateCli, ReproducibleForASeedAndStreamed) {
  const Outcome a = run(ckpt() + " --prompt hello --max-new-tokens 8 --seed 7");
  const Outcome b = run(ckpt() + " --prompt hello --max-new-tokens 8 --seed 7");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out.substr(0, a.out.find('[')), b.out.substr(0, b.out.find('['))) << "the same seed, the same text";
  EXPECT_EQ(a.out.rfind("hello", 0), 0u) << "the prompt comes first: " << a.out;
  EXPECT_NE(a.out.find("5 prompt tokens, 8 new: first token after"), std::string::npos) << a.out;
  const Outcome greedy = run(ckpt() + " --prompt-tokens 104,101 --max-new-tokens 5 --temperature 0");
  EXPECT_EQ(greedy.exit_code, 0) << greedy.err;
}

// Prompts of a file go together as a batch, each continued as it would be alone; without the
// cache (the whole window recomputed each token) the greedy tokens are the same.
TEST_F(GenerateCli, BatchesAndTheUncachedWayGiveTheSameTokens) {
  std::ofstream(dir / "prompts.txt") << "hello\nhel\nworld, he\n";
  const Outcome batch = run(ckpt() + " --prompts-file " + (dir / "prompts.txt").string() +
                            " --max-new-tokens 6 --temperature 0");
  ASSERT_EQ(batch.exit_code, 0) << batch.err;
  EXPECT_NE(batch.out.find("3 sequences, 18 new tokens: first token after"), std::string::npos) << batch.out;
  int i = 0;
  for (const char* prompt : {"hello", "hel", "world, he"}) {
    SCOPED_TRACE(prompt);
    const Outcome alone = run(ckpt() + " --prompt '" + prompt + "' --max-new-tokens 6 --temperature 0");
    ASSERT_EQ(alone.exit_code, 0) << alone.err;
    const std::string text = alone.out.substr(0, alone.out.find("\n["));
    EXPECT_NE(batch.out.find("--- " + std::to_string(++i) + " ---\n" + text + "\n"), std::string::npos)
        << text << " not in: " << batch.out;
    const Outcome uncached = run(ckpt() + " --prompt '" + prompt + "' --max-new-tokens 6 --temperature 0 --no-cache");
    ASSERT_EQ(uncached.exit_code, 0) << uncached.err;
    EXPECT_EQ(uncached.out.substr(0, uncached.out.find("\n[")), text);
    EXPECT_NE(uncached.out.find("no cache"), std::string::npos);
  }
}

// A Hugging Face directory written by export (fp32) generates what its checkpoint generates.
TEST_F(GenerateCli, FromAnExportedDirectory) {
  const std::string hf = (dir / "hf").string();
  ASSERT_EQ(std::system((std::string(TT_BINARY) + " export " + ckpt() + " --hf " + hf + " --dtype fp32 >/dev/null").c_str()), 0);
  const Outcome a = run(ckpt() + " --prompt hello --max-new-tokens 6 --temperature 0");
  const Outcome b = run(hf + " --prompt hello --max-new-tokens 6 --temperature 0");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(b.out.substr(0, b.out.find("\n[")), a.out.substr(0, a.out.find("\n[")));
  const Outcome bad = run(dir.string() + " --prompt hello");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("has no config.json"), std::string::npos) << bad.err;
}

// Beyond the context (16) the text goes on, with a line saying the window slid.
TEST_F(GenerateCli, BeyondTheContextASlidingWindow) {
  const Outcome r = run(ckpt() + " --prompt " + std::string(10, 'x') + " --max-new-tokens 30 --temperature 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("10 prompt tokens, 30 new"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("beyond the model's context of 16 tokens (its training length) each token saw the last 16"),
            std::string::npos) << r.out;
  const Outcome plain = run(ckpt() + " --prompt " + std::string(10, 'x') + " --max-new-tokens 30 --temperature 0 --no-cache");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("10 prompt tokens, 30 new"), std::string::npos) << plain.out;
}

TEST_F(GenerateCli, BadInputIsRefused) {
  const struct {
    std::string args, expect;
  } cases[] = {
      {ckpt() + " --max-new-tokens 3", "give one of --prompt"},
      {ckpt() + " --prompt ''", "--prompt: an empty prompt starts from the begin-of-document token, which bytes"},
      {(dir / "text.txt").string() + " --prompt hi", "generate: '" + (dir / "text.txt").string() + "'"},  // not --resume
      {ckpt() + " --prompt hi --tokenizer " + (dir / "nope.model").string(), "--tokenizer"},
      {ckpt() + " --prompt-tokens 1,300", "outside the vocabulary"},
      {ckpt() + " --prompt hi --top-p 0", "--top-p"},
      {ckpt() + " --prompt hi --temperature -1", "--temperature"},
      {ckpt() + " --prompt hi --prompt-tokens 1,2", "give one of --prompt"},  // not the tokens, --prompt ignored
      {ckpt() + " --prompt-tokens 1,,2", "is not a list of token ids"},
      {ckpt() + " --prompt-tokens 1,2,", "is not a list of token ids"},
      {ckpt() + " --prompt-tokens -1", "is not a list of token ids"},
      {ckpt() + " --prompt hi --seed -1", "--seed"},  // CLI11 refuses -1 itself, or reads 2^64 - 1, which we refuse
  };
  for (const auto& c : cases) {
    const Outcome r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err << r.out;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
  }
}

// A model of 300 tokens (token files of bytes, --vocab-size 300: padded, allowed) and its export
// with the bytes tokenizer, to which an EOS at id 280 is added: ids 256..279 and 281..299 are
// none of the tokenizer's.
class GeneratePadded : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir / "text.txt") << std::string(400, 'a') + "hello world, hello tokens. ";
    Outcome r = run_binary("tokenize --out " + p("tokens") + " " + p("text.txt"), dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run_binary("--device cpu --hidden-dim 16 --num-layers 1 --num-heads 2 --seq-len 16 --batch-size 2 --num-steps 2 "
                   "--vocab-size 300 --data '" + p("tokens") + "/*.bin' --save " + p("m.st"), dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run_binary("export " + p("m.st") + " --hf " + p("hf") + " --tokenizer bytes", dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json tok = nlohmann::json::parse(read_text(dir / "hf" / "tokenizer.json"));
    tok["added_tokens"] = {{{"id", 256}, {"content", "<|endoftext|>"}, {"single_word", false}, {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}}};
    std::ofstream(dir / "hf" / "tokenizer.json") << tok.dump();
  }
  std::string p(const std::string& name) const { return (dir / name).string(); }
  ScratchDir scratch_{"genpad"};
  const fs::path dir = scratch_.path();
};

// A flat distribution over 300 ids: an id the tokenizer lacks used to be drawn within a few tokens,
// and generation failed after printing the prompt.
TEST_F(GeneratePadded, NeverChoosesAnIdTheTokenizerCannotDecode) {
  for (const int seed : {1, 2, 3}) {
    const Outcome r = run_binary("generate " + p("hf") + " --prompt hello --temperature 50 --max-new-tokens 200 --seed " +
                                     std::to_string(seed), dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.rfind("hello", 0), 0u) << r.out;
  }
}

// --max-new-tokens 16777000 (its limit, with the prompt, is 2^24 positions) used to take memory for
// every position at start: the RoPE table alone, 16.8 M positions x 8 values in double, 1.07 GB.
// Now memory holds a window of the context's positions: the run is stopped after 3 s of generating.
TEST_F(GeneratePadded, HugeMaxNewTokensTakesMemoryAsItGoes) {
  const Outcome r = run_binary("generate " + p("m.st") + " --tokenizer bytes --prompt hello --max-new-tokens 16777000"
                               " --temperature 0", dir, "timeout 3 ");
  EXPECT_EQ(r.exit_code, 124) << "still generating when stopped: " << r.err;
  EXPECT_EQ(r.out.rfind("hello", 0), 0u) << r.out;
  EXPECT_LT(r.peak_kb, 400 * 1024) << "peak resident kB";
}

}  // namespace
}  // namespace tt::test
