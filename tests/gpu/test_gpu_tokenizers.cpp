// Our tokenizers against the tokenizers library itself (0.23.2), where the library is: Python's on
// the GPU machine (tests/gpu/bpe_check.py; label gpu, though no GPU is needed). TT_BPE_CHECK names
// another runner of bpe_check.py's commands, e.g. tools/bpe_check.cjs through the library's Node
// binding. Skipped, with a message, where neither is.
//
// Every configuration the byte-level BPE reader reads, made from a GPT-2-style and a LLaMA-3-style
// tokenizer the library trains on a corpus: each pattern, the prefix space on and off (after a
// Split too), ignore_merges on and off, added tokens special and not, a merge listed twice, the
// whole text as one word; SentencePiece's BPE and unigram models as the export writes them
// (sentencepiece_tokenizer_json) against our SentencePiece encoding; and the real tokenizer.json
// files in data/hf-tokenizers/*/ where the run brings them. The texts: the cases of each rule, a
// corpus, and every code point of Unicode between letters, digits, spaces and apostrophes. Each
// text's ids must be the library's (special tokens in the text split, as transformers'
// split_special_tokens=True), and for the two patterns each text's words too (the words show the
// Unicode classes at every code point, where ids alone might not).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/bpe_tokenizer.h"
#include "data/sentencepiece_json.h"
#include "data/tokenizer.h"
#include "data/tokenizer_train.h"
#include "run_outputs.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

// The library's runner: TT_BPE_CHECK, else Python's; "" where there is none.
std::string library_runner() {
  if (const char* runner = std::getenv("TT_BPE_CHECK")) return runner;
  if (std::system("python3 -c 'import tokenizers' >/dev/null 2>&1") != 0) return "";
  return "python3 " + std::string(TT_TESTS_DIR) + "/gpu/bpe_check.py";
}

// Runs a command of the library's runner; its output in `log`.
int library(const std::string& args, const fs::path& log) {
  const std::string cmd = library_runner() + " " + args + " > " + log.string() + " 2>&1";
  return std::system(cmd.c_str());
}

std::string utf8(char32_t c) {
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
}

// Texts where the rules are particular: contractions in any case (and the long s, which
// LLaMA-3's case-blind contractions take for s), digits of several scripts, runs of spaces, tabs,
// line breaks, no-break and ideographic spaces before words and at the end, punctuation runs,
// combining marks, emoji, mixed scripts, letters and digits of Unicode 15.1 and 16.0, added
// tokens' texts with spaces around them, SentencePiece's control and byte pieces as text; then
// the corpus.
std::vector<std::string> case_texts(const std::string& corpus) {
  return {"Hello world", "I'm here's don't DON'T They'RE we'Ve I'LL he'D it'S '\u017f '\u017ft",
          "12345 1.5e10 \u0661\u0662\u0663\u0664 \u00bd\u2167 x2y3 559 5559",
          "  two  spaces\tand a tab\n\nlines \r\n crlf\r\r\n  \n ",
          "no\u00a0break \u3000ideographic\u2003em \u0085nel\u000bvt\u000cff end  ",
          "!!! ... ,,, --- ===\n\n(((a))) [b] {c} <d> \"e\" 'f' `g`",
          "e\u0301 n\u0303 \u0915\u093f \u05e9\u05b8\u05dc \U0001F600\U0001F44D\U0001F3FD \u4e2d\u6587\u5b57 \u0645\u0631\u062d\u0628\u0627",
          "caf\u00e9 na\u00efve \u00c5ngstr\u00f6m \u0130stanbul \u03a3\u03bf\u03c6\u03af\u03b1 \u041c\u043e\u0441\u043a\u0432\u0430",
          "\U0002EBF0's 1\U0001CCF11 \U0002EBF0\U0001CCF1 a\U0001E5D0b",
          "Hello, world. Hello,world.", " the cat sat on the catalog; xyzzy, xyzzyxyzzy the cat",
          "def f(x):\n        return x\n    y = 2\n\n\n    <|im_start|>user\nhi<|im_end|>\n\n  <|im_start|>  ok",
          "<|im_foo x<|im_start|> <|endoftext|> <tool>x</tool> <s> </s> <unk> <0x41> <0xE2><0x82>",
          " leading", "trailing ", "\n", " ", "", corpus};
}

// Every code point (but the surrogates), each between letters, digits, spaces and an apostrophe,
// in texts of about 60 kB.
std::vector<std::string> every_code_point() {
  std::vector<std::string> texts;
  std::string chunk;
  for (char32_t c = 1; c <= 0x10FFFF; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    const std::string x = utf8(c);
    chunk += "a" + x + "1" + x + " " + x + "'" + x + x + "s\n";
    if (chunk.size() > 60000) texts.push_back(chunk), chunk.clear();
  }
  texts.push_back(chunk);
  return texts;
}

// Adds an added token to a tokenizer.json with the id the library gives it (the model's for a
// token spelt as one of its own, else the next after the model's vocabulary).
void add_token(json& file, const std::string& content, bool special, bool normalized, bool lstrip = false,
               bool rstrip = false) {
  int64_t id = int64_t(file["model"]["vocab"].size());
  for (const json& t : file["added_tokens"])
    if (!file["model"]["vocab"].contains(t["content"].get<std::string>())) ++id;
  if (file["model"]["vocab"].contains(content)) id = file["model"]["vocab"][content];
  file["added_tokens"].push_back({{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", lstrip},
                                  {"rstrip", rstrip}, {"normalized", normalized}, {"special", special}});
}

struct Configuration {
  std::string name;
  json file;
  WordPattern words = WordPattern::Whole;  // Gpt2 or Llama3: the words are compared too
};

// The configurations made from the library's GPT-2-style and LLaMA-3-style tokenizers.
// `exact_special`: the runner splits special tokens as the library does (Python's); Node's
// leaves them out instead, which differs where a special token overlaps one that is not.
std::vector<Configuration> byte_level_configurations(const json& gpt2, const json& llama3, bool exact_special) {
  std::vector<Configuration> out = {{"gpt2", gpt2, WordPattern::Gpt2}, {"llama3", llama3, WordPattern::Llama3}};
  json c = gpt2;
  c["pre_tokenizer"]["add_prefix_space"] = true;
  out.push_back({"gpt2_prefix_space", c});
  c = llama3;
  c["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true;
  out.push_back({"llama3_split_prefix_space", c});
  c = llama3;
  c["model"]["ignore_merges"] = false;
  out.push_back({"llama3_merges_not_ignored", c});
  c = gpt2;
  c["pre_tokenizer"]["use_regex"] = false;
  out.push_back({"gpt2_whole_text", c});
  c = gpt2;  // the first 40 merges again at the end: the copies rank
  for (size_t i = 0; i < 40 && i < gpt2["model"]["merges"].size(); ++i) c["model"]["merges"].push_back(gpt2["model"]["merges"][i]);
  out.push_back({"gpt2_merges_twice", c});
  for (const char* base : {"gpt2", "llama3"}) {
    c = std::string(base) == "gpt2" ? gpt2 : llama3;
    add_token(c, "xyzzy", false, true);
    add_token(c, " the cat", false, true);
    add_token(c, "    ", false, false);
    add_token(c, "<|im_start|>", false, false, true);
    add_token(c, "<|im_end|>", false, false, false, true);
    add_token(c, "<|im", false, true);
    add_token(c, "\n\n", false, true, false, true);
    add_token(c, "<tool>", true, false);
    if (exact_special) add_token(c, "x<|im", true, false);  // found first, and not taken
    out.push_back({std::string(base) + "_added_tokens", c});
  }
  return out;
}

// Our words of `text`, spelt as the library's pre-tokenizer writes them (byte-level characters),
// joined by spaces.
std::string our_words(const std::string& text, WordPattern pattern) {
  static const std::vector<std::string> chars = byte_characters();
  std::string out;
  for (const auto& [begin, end] : split_words(text, pattern)) {
    if (!out.empty()) out += ' ';
    for (size_t i = begin; i < end; ++i) out += chars[uint8_t(text[i])];
  }
  return out;
}

class LibraryCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    if (library_runner().empty()) GTEST_SKIP() << "python3 with the tokenizers library is not installed here";
  }
  // Our ids of each text against the library's for the tokenizer.json `file` (ours: `tok`).
  void compare_ids(const std::string& name, const fs::path& file, const Tokenizer& tok, const fs::path& texts_file,
                   const std::vector<std::string>& texts) {
    ASSERT_EQ(library("encode " + file.string() + " " + texts_file.string() + " " + (dir / "ids.json").string(),
                      dir / "encode.log"), 0)
        << read_text(dir / "encode.log");
    std::ifstream in(dir / "ids.json");
    const nlohmann::json theirs = nlohmann::json::parse(in);
    ASSERT_EQ(theirs.size(), texts.size());
    size_t tokens = 0, differing = 0, texts_differing = 0;  // tokens: from a text's first difference on
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::vector<int32_t> ours = tok.encode(texts[i]), want = theirs[i].get<std::vector<int32_t>>();
      tokens += want.size();
      size_t at = 0;
      while (at < std::min(ours.size(), want.size()) && ours[at] == want[at]) ++at;
      if (ours == want) continue;
      differing += std::max(ours.size(), want.size()) - at;
      const auto token = [&](const std::vector<int32_t>& ids) {
        return at < ids.size() ? std::to_string(ids[at]) + " '" + tok.decode({ids[at]}) + "'" : std::string("(none)");
      };
      if (++texts_differing <= 5)
        ADD_FAILURE() << name << ": text " << i << " '" << texts[i].substr(0, 40) << "' differs at token " << at << " of "
                    << want.size() << ": ours " << token(ours) << ", the library's " << token(want);
    }
    std::cout << name << ": " << tok.describe() << ": " << texts.size() << " texts, " << tokens << " tokens, "
              << differing << " differing\n";
    EXPECT_EQ(differing, 0u);
  }
  // Our words of each text against the library's pre-tokenizer's.
  void compare_words(const std::string& name, const fs::path& file, WordPattern pattern, const fs::path& texts_file,
                     const std::vector<std::string>& texts) {
    ASSERT_EQ(library("pretokenize " + file.string() + " " + texts_file.string() + " " + (dir / "words.json").string(),
                      dir / "words.log"), 0)
        << read_text(dir / "words.log");
    std::ifstream in(dir / "words.json");
    const nlohmann::json theirs = nlohmann::json::parse(in);
    ASSERT_EQ(theirs.size(), texts.size());
    size_t differing = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string ours = our_words(texts[i], pattern), want = theirs[i];
      if (ours == want) continue;
      size_t at = 0;
      while (at < std::min(ours.size(), want.size()) && ours[at] == want[at]) ++at;
      const size_t from = ours.rfind(' ', at) == std::string::npos ? 0 : ours.rfind(' ', at);
      if (++differing <= 5)
        ADD_FAILURE() << name << ": text " << i << ": the words differ at byte " << at << ": ours '"
                      << ours.substr(from, 40) << "', the library's '" << want.substr(from, 40) << "'";
    }
    std::cout << name << ": the words of " << texts.size() << " texts, " << differing << " differing\n";
    EXPECT_EQ(differing, 0u);
  }
  void write(const fs::path& path, const json& j) { std::ofstream(path, std::ios::binary) << j.dump(); }

  ScratchDir scratch_{"tokenizers"};
  const fs::path dir = scratch_.path();
};

std::string corpus_text() {
  std::string corpus;
  for (int i = 0; i < 400; ++i)
    corpus += "The quick brown fox's 12 jumps over the lazy dog's 345 naps; she'll say \"it's\" and they'RE off!\n"
              "Caf\u00e9 \u4e2d\u6587 line " + std::to_string(i * 7919) + "\t\ttabs   and  spaces\r\n"
              "    def cat(x):  return x / 2  # the cat <|im_start|>\n";
  return corpus;
}

TEST_F(LibraryCheck, ByteLevelBpeEncodesAsTheLibrary) {
  const std::string corpus = corpus_text();
  std::ofstream(dir / "corpus.txt", std::ios::binary) << corpus;
  json base[2];
  for (int k = 0; k < 2; ++k) {
    const std::string family = k == 0 ? "gpt2" : "llama3";
    ASSERT_EQ(library("train " + (dir / "corpus.txt").string() + " " + (dir / family).string() + " " + family,
                      dir / "train.log"), 0)
        << read_text(dir / "train.log");
    base[k] = json::parse(read_text(dir / family / "tokenizer.json"));
  }
  std::vector<Configuration> configurations =
      byte_level_configurations(base[0], base[1], std::getenv("TT_BPE_CHECK") == nullptr);
  const fs::path real = fs::path(TT_TESTS_DIR) / ".." / "data" / "hf-tokenizers";
  if (fs::is_directory(real))
    for (const auto& e : fs::directory_iterator(real))
      if (fs::exists(e.path() / "tokenizer.json"))
        configurations.push_back({e.path().filename().string(), json::parse(read_text(e.path() / "tokenizer.json"))});
  const std::vector<std::string> cases = case_texts(corpus), sweep = every_code_point();
  write(dir / "cases.json", cases);
  write(dir / "sweep.json", sweep);
  for (const Configuration& c : configurations) {
    const fs::path file = dir / (c.name + ".json");
    write(file, c.file);
    const std::unique_ptr<Tokenizer> tok = Tokenizer::load(file.string(), "test");
    compare_ids(c.name, file, *tok, dir / "cases.json", cases);
    if (c.words == WordPattern::Whole) continue;
    compare_ids(c.name + " (every code point)", file, *tok, dir / "sweep.json", sweep);
    compare_words(c.name + " (every code point)", file, c.words, dir / "sweep.json", sweep);
    compare_words(c.name, file, c.words, dir / "cases.json", cases);
  }
}

// SentencePiece's BPE and unigram models (tokenizer-train's) as the export writes them for
// transformers: the library's ids from the tokenizer.json are SentencePiece's.
TEST_F(LibraryCheck, SentencePieceExportsEncodeAsSentencePiece) {
  const std::string corpus = corpus_text();
  std::ofstream(dir / "corpus.txt", std::ios::binary) << corpus;
  const std::vector<std::string> cases = case_texts(corpus), sweep = every_code_point();
  write(dir / "cases.json", cases);
  write(dir / "sweep.json", sweep);
  for (const char* type : {"bpe", "unigram"}) {
    const std::string prefix = (dir / type).string();
    train_sentencepiece({(dir / "corpus.txt").string()}, 400, prefix, type);
    std::ofstream(dir / (std::string(type) + ".json"), std::ios::binary) << sentencepiece_tokenizer_json(prefix + ".model");
    const std::unique_ptr<Tokenizer> tok = Tokenizer::load(prefix + ".model", "test");
    compare_ids(std::string("sentencepiece_") + type, dir / (std::string(type) + ".json"), *tok, dir / "cases.json", cases);
    compare_ids(std::string("sentencepiece_") + type + " (every code point)", dir / (std::string(type) + ".json"), *tok,
                dir / "sweep.json", sweep);
  }
}

}  // namespace
}  // namespace tt::test
