// JSON the program did not write, through the binary (src/core/json_input.h): a Hugging Face
// directory's tokenizer.json, tokenizer_config.json and config.json, and a JSON-lines corpus.
// Deep nesting (100,000 brackets in one field crashed tokenize, generate and export with SIGSEGV),
// mistyped fields, a BOS or EOS the vocabulary lacks, an empty or BOM-prefixed tokenizer.json,
// an id far beyond the vocabulary and a line that is not UTF-8: each refused with one line
// naming the file and the field, exit code 2, or read as it should be.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_outputs.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A checkpoint of the bytes model and its export: a directory with a tokenizer.json (byte-level,
// no merges), a tokenizer_config.json and a config.json, all read back by generate.
class UntrustedJson : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(p("text.txt")) << std::string(400, 'a') + "the quick brown fox jumps over the lazy dog ";
    Outcome r = run_binary("--device cpu --hidden-dim 16 --num-layers 1 --num-heads 2 --seq-len 8 --batch-size 2 "
                           "--num-steps 1 --data " + p("text.txt") + " --save " + p("m.st"), dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    r = run_binary("export " + p("m.st") + " --hf " + p("hf"), dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* name : {"tokenizer.json", "tokenizer_config.json", "config.json"}) original[name] = read_json(name);
  }
  std::string p(const std::string& name) const { return (dir / name).string(); }
  json read_json(const std::string& name) const { return json::parse(read_text(dir / "hf" / name)); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(dir / "hf" / name) << text; }
  void restore() const {
    for (const auto& [name, j] : original.items()) write(name, j.dump());
  }
  // tokenize (through the directory's tokenizer.json), generate (the directory) and export (a
  // checkpoint with the directory's tokenizer.json): each refused, naming `says`.
  void every_reader_refuses(const std::string& says) {
    std::ofstream(p("doc.txt")) << "some text";
    for (const std::string& command :
         {"tokenize --tokenizer " + p("hf/tokenizer.json") + " --out " + p("tokens") + " " + p("doc.txt"),
          "generate " + p("hf") + " --prompt 'the' --max-new-tokens 2",
          "export " + p("m.st") + " --hf " + p("again") + " --tokenizer " + p("hf/tokenizer.json")}) {
      SCOPED_TRACE(command);
      const Outcome r = run_binary(command, dir);
      EXPECT_EQ(r.exit_code, 2) << r.err;
      EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
      EXPECT_FALSE(fs::exists(p("tokens")));
      EXPECT_FALSE(fs::exists(p("again")));
    }
  }

  ScratchDir scratch_{"json"};
  const fs::path dir = scratch_.path();
  json original = json::object();
};

TEST_F(UntrustedJson, DeepNestingIsRefusedNotACrash) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string text = original["tokenizer.json"].dump();
  text.insert(text.find("\"normalizer\":") + 13, deep + ", \"x\":");  // the field whose type was printed whole
  write("tokenizer.json", text);
  every_reader_refuses("tokenizer.json' is not JSON this program reads (nested deeper than 64 levels)");
  restore();
  json config = original["tokenizer_config.json"];
  config["bos_token"] = "PLACEHOLDER";
  text = config.dump();
  text.replace(text.find("\"PLACEHOLDER\""), 13, deep);
  write("tokenizer_config.json", text);
  every_reader_refuses("tokenizer_config.json' is not JSON this program reads (nested deeper than 64 levels)");
  restore();
  text = original["config.json"].dump();
  text.insert(1, "\"rope_scaling\": " + deep + ", ");
  write("config.json", text);
  const Outcome r = run_binary("generate " + p("hf") + " --prompt 'the'", dir);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("config.json' is not JSON this program reads (nested deeper than 64 levels)"), std::string::npos) << r.err;
  // A record of a JSON-lines corpus.
  std::ofstream(p("deep.jsonl")) << "{\"text\": \"fine\"}\n{\"text\": \"x\", \"meta\": " + deep + "}\n";
  const Outcome t = run_binary("tokenize --out " + p("tokens") + " " + p("deep.jsonl"), dir);
  EXPECT_EQ(t.exit_code, 2) << t.err;
  EXPECT_NE(t.err.find("deep.jsonl' line 2 is not JSON this program reads (nested deeper than 64 levels)"), std::string::npos)
      << t.err;
}

TEST_F(UntrustedJson, MistypedFieldsAreNamed) {
  json config = original["config.json"];
  config["model_type"] = 5;
  write("config.json", config.dump());
  Outcome r = run_binary("generate " + p("hf") + " --prompt 'the'", dir);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("generate: '" + p("hf") + "' has a config.json whose model_type is 5, not a string"), std::string::npos)
      << r.err;
  config = original["config.json"];
  config["tie_word_embeddings"] = "yes";
  write("config.json", config.dump());
  r = run_binary("generate " + p("hf") + " --prompt 'the'", dir);
  EXPECT_NE(r.err.find("tie_word_embeddings is \"yes\", not true or false"), std::string::npos) << r.err;
  restore();
  // The tokenizer's fields: the pre-tokenizer's switches and the post-processor's template.
  json tok = original["tokenizer.json"];
  tok["pre_tokenizer"]["use_regex"] = "no";
  write("tokenizer.json", tok.dump());
  every_reader_refuses("pre_tokenizer: a ByteLevel");
  tok = original["tokenizer.json"];
  tok["post_processor"] = {{"type", 7}, {"single", {{{"SpecialToken", 3}}}}};
  write("tokenizer.json", tok.dump());
  r = run_binary("generate " + p("hf") + " --prompt 'the' --max-new-tokens 2", dir);
  EXPECT_EQ(r.exit_code, 0) << "a post-processor this reader does not use is no error: " << r.err;
  tok["added_tokens"] = {{{"id", "5"}, {"content", "<x>"}}};
  write("tokenizer.json", tok.dump());
  every_reader_refuses("added_tokens: an object of 2 member(s) has no id and content");
  restore();
  json tc = original["tokenizer_config.json"];
  tc["eos_token"] = 5;
  write("tokenizer_config.json", tc.dump());
  every_reader_refuses("tokenizer_config.json: '" + p("hf/tokenizer_config.json") +
                       "': eos_token 5 is neither a token's text nor an object with its \"content\"");
}

// A BOS or EOS that the vocabulary lacks gave shards without their EOS and exit 0.
TEST_F(UntrustedJson, ABosOrEosTheVocabularyLacksIsRefused) {
  json tok = original["tokenizer.json"];
  tok["added_tokens"] = {{{"id", 256}, {"content", "<|endoftext|>"}, {"single_word", false}, {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}}};
  write("tokenizer.json", tok.dump());
  json tc = original["tokenizer_config.json"];
  tc["eos_token"] = "<|end|>";
  write("tokenizer_config.json", tc.dump());
  std::ofstream(p("doc.txt")) << "some text";
  Outcome r = run_binary("tokenize --tokenizer " + p("hf/tokenizer.json") + " --out " + p("tokens") + " " + p("doc.txt"), dir);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("eos_token \"<|end|>\" is not a token of the vocabulary"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(p("tokens")));
  tc["eos_token"] = {{"content", "<|endoftext|>"}};
  tc["bos_token"] = nullptr;  // none: allowed
  write("tokenizer_config.json", tc.dump());
  r = run_binary("tokenize --tokenizer " + p("hf/tokenizer.json") + " --out " + p("tokens") + " " + p("doc.txt"), dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Each document is its tokens and EOS (256) last"), std::string::npos) << r.out;
}

TEST_F(UntrustedJson, EmptyBomAndHugeIdTokenizers) {
  std::ofstream(p("doc.txt")) << "some text";
  const std::string tokenize = "tokenize --tokenizer " + p("hf/tokenizer.json") + " --out " + p("tokens") + " " + p("doc.txt");
  write("tokenizer.json", "");
  Outcome r = run_binary(tokenize, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("tokenizer.json' is empty"), std::string::npos) << r.err;
  write("tokenizer.json", "\xEF\xBB\xBF" + original["tokenizer.json"].dump());  // a byte-order mark first
  r = run_binary(tokenize, dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("byte-level BPE"), std::string::npos) << r.out;
  fs::remove_all(p("tokens"));
  json tok = original["tokenizer.json"];
  tok["model"]["vocab"]["extra"] = 16777215;  // a 16 M-token table for 257 tokens
  write("tokenizer.json", tok.dump());
  r = run_binary(tokenize, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("model.vocab: the id of \"extra\", 16777215, is not a token id below 1538"), std::string::npos) << r.err;
}

TEST_F(UntrustedJson, AJsonLineThatIsNotUtf8IsNamedSo) {
  std::ofstream(p("bad.jsonl")) << "{\"text\": \"fine\"}\n{\"text\": \"caf\xe9\"}\n";
  const Outcome r = run_binary("tokenize --out " + p("tokens") + " " + p("bad.jsonl"), dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.jsonl' line 2 is not JSON (not UTF-8 at byte 13)"), std::string::npos) << r.err;
}

// A Hugging Face directory's errors in generate name generate, not --init-from.
TEST_F(UntrustedJson, GenerateNamesItselfForADirectory) {
  fs::remove(p("hf/model.safetensors"));
  const Outcome r = run_binary("generate " + p("hf") + " --prompt 'the'", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("generate: '" + p("hf") + "' has neither model.safetensors"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tt::test
