// The tokenizer bound to the model, through the binary: tokenize copies its tokenizer beside the
// shards (the manifest lists it with its hash), training on them stores it in every checkpoint,
// and generate, export and eval use it without --tokenizer and refuse another, naming both (the
// wrong one printed text and failed, wrote a broken export with exit 0, or printed bytes as text);
// they take a --save-dir's latest checkpoint. Checkpoints without a tokenizer behave as before,
// and a checkpoint's tokenizer files are untrusted input like the rest of it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/safetensors.h"
#include "run_outputs.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class TokenizerBound : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* words[] = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and", "runs", "away"};
    std::string text;
    for (int line = 0; line < 600; ++line) {
      for (int w = 0; w < 9; ++w) text += std::string(words[(line * 7 + w * 3) % 11]) + (w < 8 ? " " : "\n");
    }
    std::ofstream(p("corpus.txt")) << text;
    ASSERT_EQ(run("tokenizer-train --vocab-size 300 --out " + p("sp") + " " + p("corpus.txt")).exit_code, 0);
    ASSERT_EQ(run("tokenizer-train --vocab-size 290 --out " + p("other") + " " + p("corpus.txt")).exit_code, 0);
  }
  std::string p(const std::string& name) const { return (dir / name).string(); }
  Outcome run(const std::string& args, const std::string& prefix = "") const { return run_binary(args, dir, prefix); }
  // Training a small model a few steps on `data`, into --save-dir `out`.
  Outcome train(const std::string& data, const std::string& out, const std::string& more = "") const {
    return run("--device cpu --hidden-dim 32 --num-layers 1 --num-heads 2 --seq-len 16 --batch-size 2 --num-steps 4 "
               "--log-every 4 --data " + data + " --save-dir " + p(out) + " " + more);
  }
  static std::string bytes(const fs::path& f) { return read_text(f); }
  ScratchDir scratch_{"bound"};
  const fs::path dir = scratch_.path();
};

TEST_F(TokenizerBound, TheShardsTokenizerGoesWithTheModel) {
  Outcome r = run("tokenize --tokenizer " + p("sp.model") + " --out " + p("tok") + " " + p("corpus.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(bytes(dir / "tok" / "tokenizer.model"), bytes(dir / "sp.model")) << "a copy beside the shards";
  const json manifest = json::parse(bytes(dir / "tok" / "manifest.json"));
  EXPECT_EQ(manifest["tokenizer_kind"], "sentencepiece");
  EXPECT_EQ(manifest["tokenizer_files"][0]["file"], "tokenizer.model");
  const std::string data = "'" + p("tok") + "/*.bin' --vocab-size 300";

  // Training without --tokenizer finds it, says so, and stores its bytes in every checkpoint.
  r = train(data, "ck");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Tokenizer: SentencePiece tokenizer.model (vocabulary 300) recorded by tokenize in '" + p("tok") +
                       "', stored in the checkpoints\n"), std::string::npos) << r.out;
  const std::string ckpt = p("ck/step_00000004.safetensors");
  const SafetensorsFile f = read_safetensors(ckpt, "test");
  EXPECT_EQ(f.metadata.at("tokenizer"), "sentencepiece");
  ASSERT_NE(f.find("tokenizer/tokenizer.model"), nullptr);
  EXPECT_EQ(read_tensor_bytes(f, *f.find("tokenizer/tokenizer.model")), bytes(dir / "sp.model"));

  // generate and export use it by default, from the checkpoint or the save directory; the same
  // tokenizer given is taken, another is refused naming both, before anything is printed.
  const std::string gen = " --prompt 'the quick' --max-new-tokens 8 --temperature 0";
  r = run("generate --save-dir " + p("ck") + gen);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[tokenizer: SentencePiece tokenizer.model (vocabulary 300) stored in '" + ckpt + "']"),
            std::string::npos) << r.out;
  const std::string text = r.out.substr(0, r.out.find("\n["));
  EXPECT_EQ(run("generate " + ckpt + gen + " --tokenizer " + p("sp.model")).out.substr(0, text.size() + 1), text + "\n");
  for (const std::string& other : {p("other.model"), std::string("bytes")}) {
    r = run("generate " + ckpt + gen + " --tokenizer " + other);
    EXPECT_EQ(r.exit_code, 2) << other;
    EXPECT_NE(r.err.find(" is not the tokenizer the model was trained with, SentencePiece tokenizer.model (vocabulary 300) "
                         "stored in '" + ckpt + "': leave --tokenizer out to use it"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  r = run("export --save-dir " + p("ck") + " --hf " + p("hf"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tokenizer: SentencePiece tokenizer.model (vocabulary 300) stored in '" + ckpt + "'"), std::string::npos)
      << r.out;
  EXPECT_EQ(bytes(dir / "hf" / "tokenizer.model"), bytes(dir / "sp.model"));
  r = run("export " + ckpt + " --hf " + p("hf2") + " --tokenizer " + p("other.model"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("SentencePiece " + p("other.model") + " (vocabulary 290) is not the tokenizer"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(p("hf2"))) << "no export with the wrong tokenizer";

  // eval too: its tasks go through the checkpoint's tokenizer.
  std::ofstream(p("task.jsonl")) << R"({"ctx": "the quick", "endings": ["brown fox", "lazy dog"], "label": 0})" "\n";
  r = run("eval --save-dir " + p("ck") + " --task " + p("task.jsonl") + " --device cpu");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run("eval --save-dir " + p("ck") + " --task " + p("task.jsonl") + " --tokenizer " + p("other.model"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is not the tokenizer the model was trained with"), std::string::npos) << r.err;

  // A resume keeps it; training on the shards with another is refused naming both, and writes nothing.
  r = run("--resume " + p("ck") + " --num-steps 6 --data " + data);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_safetensors(p("ck/step_00000006.safetensors"), "test").metadata.at("tokenizer"), "sentencepiece");
  r = train(data, "ck2", "--tokenizer " + p("other.model"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--tokenizer: SentencePiece " + p("other.model") + " (vocabulary 290) is not the tokenizer that made "
                       "the data, SentencePiece tokenizer.model (vocabulary 300) recorded by tokenize in '" + p("tok") + "'"),
            std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(p("ck2")));

  // Shards of another tokenizer: eval's loss on them and a fine-tuning run from the model are refused.
  ASSERT_EQ(run("tokenize --tokenizer " + p("other.model") + " --out " + p("tok5") + " " + p("corpus.txt")).exit_code, 0);
  r = run("eval --save-dir " + p("ck") + " --data '" + p("tok5") + "/*.bin' --device cpu");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--data: its tokens were made by SentencePiece tokenizer.model (vocabulary 290) recorded by tokenize "
                       "in '" + p("tok5") + "', not by the model's tokenizer, SentencePiece tokenizer.model (vocabulary 300)"),
            std::string::npos) << r.err;
  r = train("'" + p("tok5") + "/*.bin' --vocab-size 300", "ck5", "--init-from " + ckpt);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--init-from: the checkpoint's tokenizer, SentencePiece tokenizer.model (vocabulary 300) stored in '" +
                       ckpt + "', is not this run's"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(p("ck5")));

  // The copy changed since tokenize wrote it is named; tokenize refuses a directory holding another.
  fs::copy_file(p("other.model"), p("tok/tokenizer.model"), fs::copy_options::overwrite_existing);
  r = train(data, "ck3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("tok/tokenizer.model' has changed since tokenize copied it beside the shards"), std::string::npos) << r.err;
  fs::create_directories(p("tok4"));
  fs::copy_file(p("other.model"), p("tok4/tokenizer.model"));
  r = run("tokenize --tokenizer " + p("sp.model") + " --out " + p("tok4") + " " + p("corpus.txt"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("holds a tokenizer.model that is not the tokenizer's"), std::string::npos) << r.err;
  EXPECT_EQ(bytes(dir / "tok4" / "tokenizer.model"), bytes(dir / "other.model"));
  EXPECT_FALSE(fs::exists(p("tok4/manifest.json")));

  // Three bad ways of naming the model.
  r = run("generate " + p("ck") + gen);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("generate: '" + p("ck") + "' is a run's --save-dir, not a Hugging Face directory: give --save-dir " +
                       p("ck") + " for its latest checkpoint"), std::string::npos) << r.err;
  r = run("generate " + ckpt + " --save-dir " + p("ck") + gen);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--save-dir: give a checkpoint or --save-dir, not both"), std::string::npos) << r.err;
  fs::create_directories(p("empty"));
  r = run("export --save-dir " + p("empty") + " --hf " + p("hf3"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--save-dir: '" + p("empty") + "' holds no step checkpoint"), std::string::npos) << r.err;
}

// A model trained on a text file stores its bytes tokenizer (the kind alone); one trained on
// synthetic data, or on shards whose tokenizer is not recorded, stores none, and --tokenizer
// chooses as before.
TEST_F(TokenizerBound, WithoutOneTheChoiceIsTheUsers) {
  std::ofstream(p("text.txt")) << std::string(400, 'a') + "hello world, hello tokens. ";
  Outcome r = train(p("text.txt"), "bytes");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Tokenizer: bytes (vocabulary 256) of the text file --data, stored in the checkpoints"),
            std::string::npos) << r.out;
  const SafetensorsFile f = read_safetensors(p("bytes/step_00000004.safetensors"), "test");
  EXPECT_EQ(f.metadata.at("tokenizer"), "bytes");
  for (const SafetensorInfo& t : f.tensors) EXPECT_NE(t.dtype, "U8") << t.name;
  r = run("generate --save-dir " + p("bytes") + " --prompt hi --max-new-tokens 4 --tokenizer " + p("sp.model"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is not the tokenizer the model was trained with, bytes (vocabulary 256) stored in"), std::string::npos)
      << r.err;

  // Shards of a tokenize that recorded no tokenizer (before it did): none is stored.
  ASSERT_EQ(run("tokenize --out " + p("old") + " " + p("text.txt")).exit_code, 0);
  json manifest = json::parse(bytes(dir / "old" / "manifest.json"));
  manifest.erase("tokenizer_kind"), manifest.erase("tokenizer_files");
  std::ofstream(p("old/manifest.json")) << manifest.dump();
  r = train("'" + p("old") + "/*.bin' --vocab-size 256", "old-ck");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("Tokenizer:"), std::string::npos) << r.out;
  EXPECT_EQ(read_safetensors(p("old-ck/step_00000004.safetensors"), "test").metadata.count("tokenizer"), 0u);

  r = train("synthetic --vocab-size 256", "synthetic");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("Tokenizer:"), std::string::npos) << r.out;
  EXPECT_EQ(read_safetensors(p("synthetic/step_00000004.safetensors"), "test").metadata.count("tokenizer"), 0u);
  r = run("generate --save-dir " + p("synthetic") + " --prompt hi --max-new-tokens 4");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("[tokenizer:"), std::string::npos) << r.out;
  r = run("generate --save-dir " + p("synthetic") + " --prompt hi --max-new-tokens 4 --tokenizer " + p("sp.model"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("(vocabulary 300) does not fit the model's vocabulary of 256"), std::string::npos) << r.err;
}

// A checkpoint's tokenizer is untrusted: an unknown kind, a missing or mistyped file tensor are
// refused by the reader naming it; files that do not load are named with the checkpoint, and the
// private directory they were loaded from is gone in every case.
TEST_F(TokenizerBound, AStoredTokenizerIsUntrustedInput) {
  ASSERT_EQ(run("tokenize --tokenizer " + p("sp.model") + " --out " + p("tok") + " " + p("corpus.txt")).exit_code, 0);
  ASSERT_EQ(train("'" + p("tok") + "/*.bin' --vocab-size 300", "ck").exit_code, 0);
  const std::string good = bytes(dir / "ck" / "step_00000004.safetensors");
  const uint64_t n = *reinterpret_cast<const uint64_t*>(good.data());
  const json header = json::parse(good.substr(8, n));
  auto variant = [&](const std::string& name, const std::function<void(json&, std::string&)>& change) {
    json h = header;
    std::string data = good.substr(8 + n);
    change(h, data);
    const std::string text = h.dump();
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[size_t(i)] = char(uint64_t(text.size()) >> (8 * i));
    std::ofstream(p(name), std::ios::binary) << file + text + data;
    return p(name);
  };
  const std::string tensor = "tokenizer/tokenizer.model";
  const struct {
    std::string file, expect;
  } cases[] = {
      {variant("kind.st", [](json& h, std::string&) { h["__metadata__"]["tokenizer"] = "wordpiece"; }),
       "metadata 'tokenizer' names no tokenizer this build reads ('wordpiece')"},
      {variant("renamed.st", [&](json& h, std::string&) { h["tokenizer/other"] = h[tensor]; h.erase(tensor); }),
       "tensor 'tokenizer/tokenizer.model' of its tokenizer is missing"},
      {variant("dtype.st", [&](json& h, std::string&) {
         const uint64_t begin = h[tensor]["data_offsets"][0], end = h[tensor]["data_offsets"][1];
         h[tensor]["shape"] = json::array({1, end - begin});
       }),
       "tensor 'tokenizer/tokenizer.model' is not the bytes of a file (U8, one dimension)"},
      {variant("garbage.st", [&](json& h, std::string& data) {
         const uint64_t begin = h[tensor]["data_offsets"][0], end = h[tensor]["data_offsets"][1];
         for (uint64_t i = begin; i < end; ++i) data[i] = char(0x8f);
       }),
       "generate: the tokenizer stored in '" + p("garbage.st") + "' does not load: 'tokenizer.model' is not a SentencePiece model"},
  };
  fs::create_directories(p("tmp"));
  for (const auto& c : cases) {
    const Outcome r = run("generate " + c.file + " --prompt the --max-new-tokens 2", "TMPDIR=" + p("tmp") + " ");
    EXPECT_EQ(r.exit_code, 2) << c.file;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  EXPECT_TRUE(fs::is_empty(p("tmp"))) << "the stored tokenizer's private directory is removed";
  const Outcome r = run("generate " + p("ck/step_00000004.safetensors") + " --prompt the --max-new-tokens 2",
                        "TMPDIR=" + p("tmp") + " ");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_empty(p("tmp")));
}

}  // namespace
}  // namespace tt::test
