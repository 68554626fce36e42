// Real data: token files (llm.c's format and our uint32 variant) written and read back, every
// malformed file refused with its name and the position, shards and validation splits, the
// tokenizers (bytes and SentencePiece) round-tripping text exactly, and the tokenize ->
// train path through the real binary, on a generated corpus and on Debian's fortunes.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>

#include <map>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "data/token_file.h"
#include "data/tokenize.h"
#include "run_outputs.h"
#include "data/tokenizer.h"
#include "data/tokenizer_train.h"
#include "train/checkpoint.h"
#include "data/loader.h"
#include "train/trainer.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;

class RealData : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (dir / name).string(); }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
    return path(name);
  }
  // The raw bytes of a token file: a header and `count` tokens of `width` bytes (value i % 7).
  static std::string raw_token_file(int32_t magic, int32_t version, int32_t count, int width, int64_t tokens) {
    std::string s(size_t(kTokenFileHeaderBytes), '\0');
    int32_t* h = reinterpret_cast<int32_t*>(s.data());
    h[0] = magic, h[1] = version, h[2] = count;
    for (int64_t i = 0; i < tokens; ++i) {
      const uint32_t v = uint32_t(i % 7);
      s.append(reinterpret_cast<const char*>(&v), size_t(width));
    }
    return s;
  }
  ScratchDir scratch_{"data"};
  const fs::path dir = scratch_.path();
};

TEST_F(RealData, TokenFilesRoundTripInBothWidths) {
  std::vector<int32_t> small = {0, 1, 65535, 42}, large = {0, 70000, 1 << 20, 5};
  write_token_file(path("a.bin"), small);
  write_token_file(path("b.bin"), large);
  const TokenFile a(path("a.bin"), 65536, "--data"), b(path("b.bin"), (1 << 20) + 1, "--data");
  EXPECT_EQ(a.version(), 1);  // llm.c's uint16
  EXPECT_EQ(b.version(), 7);  // llm.c's LLaMA-3 kind, uint32
  EXPECT_EQ(fs::file_size(path("a.bin")), uint64_t(kTokenFileHeaderBytes + 2 * 4));
  ASSERT_EQ(a.size(), 4);
  ASSERT_EQ(b.size(), 4);
  std::vector<int32_t> got(4);
  a.read(0, 4, got.data());
  EXPECT_EQ(got, small);
  b.read(0, 4, got.data());
  EXPECT_EQ(got, large);
  a.read(1, 2, got.data());
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[1], 65535);
}

// The headers other tools write, made here by hand as their documentation states them: llm.c's
// GPT-2 shards and modded-nanogpt's FineWeb shards (magic 20240520, version 1, uint16), llm.c's
// LLaMA-3 shards (magic 20240801, version 7, uint32), and this project's earlier uint32 (20240520,
// version 2). The rest of each header is zeros, as theirs are.
TEST_F(RealData, OtherToolsShardsRead) {
  const struct {
    int32_t magic, version, width;
  } kinds[] = {{20240520, 1, 2}, {20240801, 7, 4}, {20240520, 2, 4}};
  for (const auto& k : kinds) {
    SCOPED_TRACE(std::to_string(k.magic) + " v" + std::to_string(k.version));
    std::vector<int32_t> header(256, 0);
    header[0] = k.magic, header[1] = k.version, header[2] = 3;
    std::string bytes(reinterpret_cast<const char*>(header.data()), 1024);
    for (uint32_t t : {50256u, 7u, 1234u}) bytes.append(reinterpret_cast<const char*>(&t), size_t(k.width));
    write("shard.bin", bytes);
    const TokenFile f(path("shard.bin"), 50257, "--data");
    std::vector<int32_t> got(3);
    f.read(0, 3, got.data());
    EXPECT_EQ(got, (std::vector<int32_t>{50256, 7, 1234}));
  }
}

// Each malformed file is refused with its name and what is wrong.
TEST_F(RealData, MalformedTokenFilesAreRefused) {
  const struct {
    const char* name;
    std::string bytes;
    const char* expect;
  } cases[] = {
      {"foreign.bin", raw_token_file(12345, 1, 10, 2, 10), "not a token file"},
      {"short.bin", std::string(100, 'x'), "shorter than its 1024-byte header"},
      {"version.bin", raw_token_file(kTokenFileMagic, 3, 10, 2, 10), "version 3"},
      {"truncated.bin", raw_token_file(kTokenFileMagic, 1, 10, 2, 9), "truncated"},
      {"long.bin", raw_token_file(kTokenFileMagic, 1, 10, 2, 11), "where its header's 10 tokens"},
      {"negative.bin", raw_token_file(kTokenFileMagic, 1, -1, 2, 0), "negative token count"},
      {"vocab.bin", raw_token_file(kTokenFileMagic, 2, 10, 4, 10), "token 6 at position 6, outside the vocabulary of 6"},
  };
  for (const auto& c : cases) {
    const std::string p = write(c.name, c.bytes);
    const std::string why = refusal([&] { TokenFile f(p, 6, "--data"); });
    EXPECT_NE(why.find(c.expect), std::string::npos) << c.name << ": " << why;
    EXPECT_NE(why.find(c.name), std::string::npos) << c.name << ": " << why;
  }
  fs::create_directories(dir / "adir.bin");
  EXPECT_NE(refusal([&] { TokenFile f(path("adir.bin"), 6, "--data"); }).find("not a regular file"), std::string::npos);
  ASSERT_EQ(::mkfifo(path("fifo.bin").c_str(), 0600), 0);  // a FIFO is refused, never read (which would block)
  EXPECT_NE(refusal([&] { TokenFile f(path("fifo.bin"), 6, "--data"); }).find("not a regular file"), std::string::npos);
  EXPECT_NE(refusal([&] { make_data_source(path("fifo.bin"), 256, 1, 4, 1); }).find("not a regular file"),
            std::string::npos);
  EXPECT_NE(refusal([&] { make_data_source(path("none_*.bin"), 256, 1, 4, 1); }).find("no file matches"),
            std::string::npos);
}

// Shards of a pattern: "val" in a name validates; the windows stay inside a file and step by T.
TEST_F(RealData, ShardsAndTheirValidationSplit) {
  std::vector<int32_t> t0(100), t1(50), v(30);
  for (int i = 0; i < 100; ++i) t0[size_t(i)] = i;
  for (int i = 0; i < 50; ++i) t1[size_t(i)] = 200 + i;
  for (int i = 0; i < 30; ++i) v[size_t(i)] = 300 + i;
  write_token_file(path("train_000000.bin"), t0);
  write_token_file(path("train_000001.bin"), t1);
  write_token_file(path("val_000000.bin"), v);
  EXPECT_TRUE(names_token_files(path("*.bin")));
  auto data = make_data_source(path("*.bin"), 400, 2, 9, 1);
  // Windows of 10 tokens stepping by 9: 11 in the first file ((100 - 1) / 9), 5 in the second.
  Batch b;
  std::vector<int32_t> firsts;
  for (int i = 0; i < 8; ++i) {
    data->next_batch(b);
    for (int r = 0; r < 2; ++r) {
      firsts.push_back(b.tokens[size_t(r) * 9]);
      for (int p = 0; p < 9; ++p) ASSERT_EQ(b.targets[size_t(r) * 9 + p], b.tokens[size_t(r) * 9 + p] + 1) << "shifted once";
    }
  }
  EXPECT_EQ(firsts[10], 90);   // window 10: tokens 90..99 of the first file
  EXPECT_EQ(firsts[11], 200);  // window 11: the second file's first, not a window across the two
  EXPECT_EQ(firsts[15], 236);
  EXPECT_EQ(firsts[0], 0);     // 16 windows in all: the 17th is the first again
  EXPECT_EQ(data->all_validation_windows(), 3);  // (30 - 1) / 9
  data->validation_windows_batch(0, 2, b);
  EXPECT_EQ(b.tokens[0], 300);
  // Without a "val" file, the last 10% of the training tokens validate.
  fs::remove(path("val_000000.bin"));
  auto no_val = make_data_source(path("train_*.bin"), 400, 1, 4, 1);
  EXPECT_NE(no_val->describe().find("the last 10%"), std::string::npos) << no_val->describe();
  no_val->validation_windows_batch(0, 1, b);
  EXPECT_EQ(b.tokens[0], 235);  // 150 tokens, the last 15: tokens 35.. of the second file
  // A vocabulary too small for the tokens names the file and the position.
  const std::string why = refusal([&] { make_data_source(path("*.bin"), 240, 1, 4, 1); });
  EXPECT_NE(why.find("train_000001.bin' has token 240 at position 40"), std::string::npos) << why;
}

TEST_F(RealData, BytesTokenizerRoundTrips) {
  const auto tok = Tokenizer::load("bytes", "--tokenizer");
  const std::string text = "h\xc3\xa9llo\n\tw\x01rld\xff";
  EXPECT_EQ(tok->vocab_size(), 256);
  EXPECT_EQ(tok->encode(text).size(), text.size());
  EXPECT_EQ(tok->decode(tok->encode(text)), text);
  EXPECT_EQ(tok->encode("\xc3\xa9\xff")[0], 0xc3) << "a byte over 0x7f is a token in [128, 256), not a negative one";
  EXPECT_EQ(tok->encode("\xc3\xa9\xff")[2], 0xff);
  // Through the binary: non-ASCII text in, every token of the shards in [0, 256), and it trains.
  const std::string text_file = write("caf.txt", std::string(300, 'a') + "caf\xc3\xa9 na\xc3\xafve \xe2\x82\xac\n");
  Outcome r = run_binary("tokenize --out " + path("tok") + " " + text_file, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& e : fs::directory_iterator(path("tok")))
    if (e.path().extension() == ".bin") {
      const TokenFile f(e.path().string(), 256, "--data");  // refuses a token outside [0, 256)
      EXPECT_GT(f.size(), 0);
    }
  r = run_binary("--device cpu --data '" + path("tok/*.bin") + "' --vocab-size 256 --hidden-dim 32 --num-layers 1 "
                 "--num-heads 2 --seq-len 16 --batch-size 2 --num-steps 2", dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// tokenize --val-split docs: whole documents (input files), drawn with --seed, validate while they
// bring the held tokens nearer --val-fraction; each split keeps the input order, and every document is in
// exactly one. The same seed draws the same documents, another seed others.
TEST_F(RealData, ValidationDocumentsAreDrawnWithTheSeed) {
  std::string files;
  for (int d = 0; d < 20; ++d) files += " " + write("doc" + std::to_string(d) + ".txt", std::string(size_t(50 + d), char('a' + d)));
  auto split = [&](const std::string& out, int seed) {
    Outcome r = run_binary("tokenize --val-split docs --seed " + std::to_string(seed) + " --out " + path(out) + files, dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("to validate (documents drawn with seed " + std::to_string(seed) + ")"), std::string::npos) << r.out;
    std::map<std::string, std::string> docs;  // split -> the documents' letters, in order
    for (const char* name : {"train", "val"}) {
      const TokenFile f(path(out + "/" + name + "_000000.bin"), 256, "--data");
      std::vector<int32_t> t(size_t(f.size()));
      f.read(0, f.size(), t.data());
      for (size_t i = 0; i < t.size(); ++i)
        if (i == 0 || t[i] != t[i - 1]) docs[name] += char(t[i]);
    }
    return docs;
  };
  const auto a = split("a", 1), b = split("b", 1), c = split("c", 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a.at("val"), c.at("val"));
  std::string all = a.at("train") + a.at("val");
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, "abcdefghijklmnopqrst") << "every document in one split";
  for (const auto& [name, letters] : a) EXPECT_TRUE(std::is_sorted(letters.begin(), letters.end())) << name;
  int64_t val_tokens = 0;
  for (char d : a.at("val")) val_tokens += 50 + (d - 'a');
  EXPECT_NEAR(val_tokens, (20 * 50 + 190) / 10, 35) << "documents added while they bring it nearer the fraction";
}

std::string corpus_text();

// tokenizer-train never destroys or half-writes: an input named as an output is refused, a
// failed run leaves the last good model as it was, a FIFO in an output's place is refused
// before any work, a path with spaces is one path, and a vocabulary too small for the corpus
// is refused naming --vocab-size.
TEST_F(RealData, TokenizerTrainProtectsItsInputsAndOutputs) {
  const std::string corpus = write("my corpus.txt", corpus_text());
  Outcome r = run_binary("tokenizer-train --vocab-size 300 --out '" + path("my tok") + "' '" + corpus + "'", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string good = read_text(path("my tok.model"));
  ASSERT_FALSE(good.empty());
  EXPECT_GT(read_text(path("my tok.vocab")).size(), 0u);
  // The corpus as its own output (PREFIX.model is the input): refused, the corpus intact.
  const std::string victim = write("c.model", corpus_text());
  r = run_binary("tokenizer-train --vocab-size 300 --out " + path("c") + " " + victim, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is the same file as"), std::string::npos) << r.err;
  EXPECT_EQ(read_text(victim), corpus_text());
  // A failed re-run (a corpus that needs more than 260 tokens): the last good model survives.
  std::string wide;
  for (int c = 0x4e00; c < 0x4e00 + 200; ++c)  // 200 distinct CJK characters, three bytes each
    wide += std::string{char(0xe0 | (c >> 12)), char(0x80 | ((c >> 6) & 0x3f)), char(0x80 | (c & 0x3f))};
  const std::string cjk = write("cjk.txt", wide + "\n" + wide + "\n");
  r = run_binary("tokenizer-train --vocab-size 260 --out '" + path("my tok") + "' " + cjk, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--vocab-size: 260 is too small for this corpus"), std::string::npos) << r.err;
  EXPECT_EQ(read_text(path("my tok.model")), good);
  // A FIFO where the vocabulary would go: refused at once, not written into (no hang).
  ASSERT_EQ(::mkfifo(path("f.vocab").c_str(), 0600), 0);
  r = run_binary("tokenizer-train --vocab-size 300 --out " + path("f") + " '" + corpus + "'", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("f.model")));
}

// A corpus of a few hundred lines with repeated words, so that BPE has pieces to learn.
std::string corpus_text() {
  const char* words[] = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and", "runs", "away"};
  std::string s;
  for (int line = 0; line < 400; ++line) {
    for (int w = 0; w < 9; ++w) s += std::string(words[(line * 7 + w * 3) % 11]) + (w < 8 ? " " : "");
    s += line % 5 == 0 ? ".\n\n" : ",\n";
  }
  return s + "caf\xc3\xa9 na\xc3\xafve 12345\n";
}

// tokenizer-train says what it read and what it wrote: SentencePiece's trainer log (its progress,
// its settings) is not printed.
TEST_F(RealData, TokenizerTrainSaysWhatItReadAndWrote) {
  const std::string corpus = write("corpus.txt", corpus_text());
  const Outcome r = run_binary("tokenizer-train --vocab-size 300 --out " + path("quiet") + " " + corpus, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, "Read 1 files, 1 documents, " + std::to_string(corpus_text().size()) +
                       " bytes: 401 lines, 401 sentences for SentencePiece\nWrote " +
                       path("quiet") + ".model and " + path("quiet") + ".vocab: SentencePiece " + path("quiet") +
                       ".model (vocabulary 300)\n");
}

TEST_F(RealData, SentencePieceTrainsAndRoundTripsExactly) {
  const std::string corpus = write("corpus.txt", corpus_text());
  train_sentencepiece({corpus}, 400, path("sp"), "bpe");  // 256 bytes, 3 special tokens, the rest pieces
  const auto tok = Tokenizer::load(path("sp.model"), "--tokenizer");
  EXPECT_LE(tok->vocab_size(), 400);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_LT(tok->encode(corpus_text()).size(), corpus_text().size() / 2) << "too few pieces learned";
  for (const std::string text : {corpus_text(), std::string("  two  spaces\n\nand a tab\t! \xe2\x82\xac unseen: zq")})
    EXPECT_EQ(tok->decode(tok->encode(text)), text) << "whitespace, newlines and unseen characters must survive";
  EXPECT_NE(refusal([&] { Tokenizer::load(corpus, "--tokenizer"); }).find("is not a SentencePiece model"),
            std::string::npos);
  EXPECT_NE(refusal([&] { train_sentencepiece({corpus}, 100, path("x"), "bpe"); }).find("--vocab-size"),
            std::string::npos);
}

// tokenize's inputs: a directory (its files, recursively, in name order), a JSON-lines file (a
// document a record, its "text" or --text-field), a text file a document a line (--documents
// line, empty lines none); every document is BOS, its tokens, EOS with a SentencePiece model.
// A record without its text is refused with the file and the line, and nothing is written.
TEST_F(RealData, DocumentsFromDirectoriesJsonLinesAndLines) {
  const std::string corpus = write("corpus.txt", corpus_text());
  train_sentencepiece({corpus}, 400, path("sp"), "bpe");
  const auto tok = Tokenizer::load(path("sp.model"), "--tokenizer");
  fs::create_directories(path("in/sub"));
  std::ofstream(path("in/b.txt")) << "second file";
  std::ofstream(path("in/sub/c.txt")) << "third file";
  std::ofstream(path("in/a.txt")) << "first file";
  std::ofstream(path("recs.jsonl")) << "{\"text\": \"one record\", \"id\": 1}\n\n{\"body\": \"x\", \"text\": \"two\"}\n";
  std::ofstream(path("lines.txt")) << "line one\n\nline two\n";
  auto docs = [&](const std::string& args, const std::string& out) {
    Outcome r = run_binary("tokenize --val-fraction 0 --tokenizer " + path("sp.model") + " --out " + path(out) + " " + args, dir);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("MB/s on"), std::string::npos) << r.out;
    const TokenFile f(path(out + "/train_000000.bin"), tok->vocab_size(), "--data");
    std::vector<int32_t> t(size_t(f.size()));
    f.read(0, f.size(), t.data());
    std::vector<std::string> texts;  // between each BOS and its EOS
    for (size_t i = 0; i < t.size(); ++i) {
      EXPECT_EQ(t[i], 1) << "a document starts with BOS";
      const size_t end = size_t(std::find(t.begin() + i, t.end(), 2) - t.begin());
      EXPECT_LT(end, t.size()) << "and ends with EOS";
      texts.push_back(tok->decode(std::vector<int32_t>(t.begin() + i + 1, t.begin() + end)));
      i = end;
    }
    return texts;
  };
  EXPECT_EQ(docs(path("in"), "d"), (std::vector<std::string>{"first file", "second file", "third file"}));
  EXPECT_EQ(docs(path("recs.jsonl"), "j"), (std::vector<std::string>{"one record", "two"}));
  std::ofstream(path("body.jsonl")) << "{\"body\": \"alpha\"}\n";
  EXPECT_EQ(docs("--text-field body " + path("body.jsonl"), "k"), (std::vector<std::string>{"alpha"}));
  EXPECT_EQ(docs("--documents line " + path("lines.txt"), "l"), (std::vector<std::string>{"line one", "line two"}));
  std::ofstream(path("bad.jsonl")) << "{\"text\": \"fine\"}\n[1, 2]\n";
  Outcome r = run_binary("tokenize --tokenizer " + path("sp.model") + " --out " + path("bad") + " " + path("bad.jsonl"), dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.jsonl' line 2 is not a JSON object"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("bad")));
}

// The tokenizer encodes a word at a time, from a cache (src/data/tokenizer.cpp): the same ids as
// SentencePiece's own encoding of the whole text, for texts with leading, double and trailing
// spaces, tabs, newlines, digits and unseen characters, and for every file of the fortunes (a
// model trained on them) where the machine has them.
TEST_F(RealData, WordCacheEncodesAsSentencePieceDoes) {
  std::vector<std::string> texts = {corpus_text(), " leading", "  two leading", "trailing ", "a  b   c\t d\n\n e",
                                    "x 1234 5.6 \xe2\x82\xac\xe2\x82\xac zq ", " ", "  ", "", "word", "\n\n\tThe jury"};
  std::string training = corpus_text();
  const fs::path fortunes = "/usr/share/games/fortunes";
  if (fs::is_directory(fortunes))
    for (const auto& e : fs::directory_iterator(fortunes))
      if (e.path().extension().empty() && e.is_regular_file()) {
        std::ifstream in(e.path(), std::ios::binary);
        texts.emplace_back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        training += texts.back();
      }
  const std::string corpus = write("corpus.txt", training);
  train_sentencepiece({corpus}, 2000, path("sp"), "bpe");
  const auto tok = Tokenizer::load(path("sp.model"), "--tokenizer");
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load(path("sp.model")).ok());
  for (int pass = 0; pass < 2; ++pass)  // the second from the cache
    for (const std::string& text : texts) {
      std::vector<int> want;
      ASSERT_TRUE(sp.Encode(text, &want).ok());
      const std::vector<int32_t> got = tok->encode(text);
      ASSERT_EQ(std::vector<int>(got.begin(), got.end()), want) << "text of " << text.size() << " bytes: " << text.substr(0, 80);
    }
}

// tokenizer-train, tokenize, then training on the shards: the validation loss starts near
// ln(vocabulary) and falls; the checkpoint resumes only on the same data.
void tokenize_and_train(const std::vector<std::string>& inputs, const fs::path& dir, int vocab, int steps,
                        double min_drop) {
  std::string files;
  for (const std::string& f : inputs) files += " '" + f + "'";
  Outcome r = run_binary("tokenizer-train --vocab-size " + std::to_string(vocab) + " --out " + (dir / "sp").string() + files,
                         dir);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  r = run_binary("tokenize --tokenizer " + (dir / "sp.model").string() + " --out " + (dir / "tokens").string() + files, dir);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const size_t at = r.out.find("--vocab-size ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const int v = std::stoi(r.out.substr(at + 13));
  EXPECT_TRUE(fs::exists(dir / "tokens" / "train_000000.bin"));
  EXPECT_TRUE(fs::exists(dir / "tokens" / "val_000000.bin"));
  TrainOptions o;
  o.data = (dir / "tokens" / "*.bin").string();
  o.model.vocab_size = v, o.model.hidden = 64, o.model.layers = 2, o.model.heads = 4, o.model.kv_heads = 2;
  o.model.intermediate = 128;
  o.batch = 8, o.seq_len = 32, o.steps = steps, o.log_every = steps, o.learning_rate = 3e-3, o.timing_warmup = 0;
  o.backend.device = DeviceKind::Cpu;
  std::ostringstream log;
  const TrainResult res = train(o, log);
  ASSERT_GE(res.validation.size(), 2u) << log.str();
  EXPECT_NEAR(res.validation.front().second, std::log(double(v)), 0.5) << log.str();
  EXPECT_LT(res.validation.back().second, res.validation.front().second - min_drop) << log.str();
  // A second tokenize into the same directory is refused: old and new shards must not mix.
  r = run_binary("tokenize --out " + (dir / "tokens").string() + files, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("already holds token files"), std::string::npos) << r.err;
}

TEST_F(RealData, TokenizeThenTrainOnAGeneratedCorpus) {
  tokenize_and_train({write("a.txt", corpus_text()), write("b.txt", corpus_text())}, dir, 300, 60, 1.0);
}

TEST_F(RealData, TokenizeThenTrainOnFortunes) {
  std::vector<std::string> inputs;
  for (const char* d : {"/usr/share/games/fortunes", "/usr/share/fortunes"})
    if (fs::is_directory(d))
      for (const auto& e : fs::directory_iterator(d))
        if (e.is_regular_file() && e.path().extension().empty()) inputs.push_back(e.path().string());
  if (inputs.empty()) GTEST_SKIP() << "Debian's fortunes package is not installed (scripts/install-deps.sh installs it)";
  std::sort(inputs.begin(), inputs.end());
  tokenize_and_train(inputs, dir, 1000, 40, 0.8);
}

// A token file truncated while a run reads it: one line naming the file, exit code 1, and the
// last periodic checkpoint intact (the memory map it replaced died of SIGBUS, exit 135).
TEST_F(RealData, ATokenFileTruncatedMidRunIsNamed) {
  std::vector<int32_t> tokens(200000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(i * 13 % 64);
  write_token_file(path("train_000000.bin"), tokens);
  write_token_file(path("val_000000.bin"), std::vector<int32_t>(tokens.begin(), tokens.begin() + 1000));
  const std::string cmd = std::string(TT_BINARY) + " --device cpu --hidden-dim 16 --num-layers 1 --num-heads 2 "
                          "--seq-len 16 --batch-size 2 --vocab-size 64 --data '" + path("*.bin") +
                          "' --num-steps 1000000 --log-every 10 --eval-every 100000 --save-every 20 --save " +
                          path("ck.st") + " >" + path("out.log") + " 2>" + path("err.log");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 6000 && read_text(path("out.log")).find("Step  50/") == std::string::npos; ++i)
    ::usleep(5000);
  fs::resize_file(path("train_000000.bin"), kTokenFileHeaderBytes + 1000);
  int status = 0;
  for (int i = 0; i < 2000 && ::waitpid(pid, &status, WNOHANG) == 0; ++i) ::usleep(5000);
  if (::waitpid(pid, &status, WNOHANG) == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL() << "the run went on after its data was truncated";
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << "status " << status << ": " << read_text(path("err.log"));
  EXPECT_NE(read_text(path("err.log")).find("train_000000.bin' changed while training"), std::string::npos)
      << read_text(path("err.log"));
  EXPECT_NO_THROW(read_checkpoint_info(path("ck.st")));
}

// Token-file data is identified by content: the same shards spelled another way resume, a shard
// rewritten in its middle (the same size) is refused as other data.
TEST_F(RealData, ResumeKnowsTokenFilesByContent) {
  std::vector<int32_t> tokens(300000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(i * 7 % 64);
  write_token_file(path("train_000000.bin"), tokens);
  write_token_file(path("val_000000.bin"), std::vector<int32_t>(tokens.begin(), tokens.begin() + 1000));
  const std::string model = " --device cpu --hidden-dim 16 --num-layers 1 --num-heads 2 --seq-len 16 --batch-size 2"
                            " --vocab-size 64";
  Outcome r = run_binary("--data '" + path("*.bin") + "'" + model + " --num-steps 2 --save " + path("ck.st"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_binary("--data '" + (dir / "." / "*.bin").string() + "'" + model + " --num-steps 4 --resume " + path("ck.st"), dir);
  EXPECT_EQ(r.exit_code, 0) << "another spelling of the same files: " << r.err;
  tokens[150000] = 5;  // the middle of the shard, same size
  write_token_file(path("train_000000.bin"), tokens);
  r = run_binary("--data '" + path("*.bin") + "'" + model + " --num-steps 4 --resume " + path("ck.st"), dir);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--resume: the checkpoint was trained on"), std::string::npos) << r.err;
}

TEST_F(RealData, TokenizeRefusesBadInput) {
  const std::string text = write("t.txt", "hello"), binary = write("b.dat", std::string("ab\0cd", 5));
  Outcome r = run_binary("tokenize --out " + path("o") + " " + binary, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is not text"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("o"))) << "nothing is written when an input is refused";
  r = run_binary("tokenize --tokenizer " + path("missing.model") + " --out " + path("o") + " " + text, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--tokenizer"), std::string::npos) << r.err;
  r = run_binary("tokenize --out " + text + " " + text, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not a directory"), std::string::npos) << r.err;
  // Token files without --vocab-size: the trainer cannot guess the tokenizer's vocabulary.
  write_token_file(path("train_000000.bin"), std::vector<int32_t>(200, 3));
  r = run_binary("--device cpu --data '" + path("*.bin") + "'", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--vocab-size"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tt::test
