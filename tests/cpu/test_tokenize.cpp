// tokenize under the conditions a corpus meets, through the binary: a document encoded a piece
// at a time gives the tokens of the whole (SentencePiece, GPT-2's and LLaMA-3's patterns) in
// bounded memory (a 16 MB word, a line without spaces, --threads 1024, a message naming
// tokenize's remedy when memory runs out anyway); compressed (.gz, .zst) and piped input give
// the shards of the plain file; --val-split docs stays near the fraction or says why; a run that
// fails (a full disk) or is killed leaves no shards a training run accepts, a shard changed
// since tokenize wrote it is refused, and temporaries of dead runs go. tokenizer-train takes the
// same inputs, cuts what SentencePiece would drop, samples and shows progress on a terminal.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <random>

#include "data/token_file.h"
#include "data/tokenizer.h"
#include "run_outputs.h"

namespace tt::test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class Tokenize : public ::testing::Test {
 protected:
  std::string p(const std::string& name) const { return (dir / name).string(); }
  void write(const std::string& name, const std::string& bytes) const { std::ofstream(dir / name, std::ios::binary) << bytes; }
  static std::string bytes(const fs::path& f) {
    std::ifstream in(f, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  std::vector<int32_t> tokens(const std::string& file, int vocab) const {
    const TokenFile f(p(file), vocab, "--data");
    std::vector<int32_t> t(size_t(f.size()));
    f.read(0, f.size(), t.data());
    return t;
  }
  // A tokenizer.json of the byte-level kind: the bytes model's export, given a word pattern
  // ("gpt2" or "llama3"), a few merges and <|endoftext|>, the EOS.
  std::string bpe_tokenizer(const std::string& pattern) {
    if (!fs::exists(p("hf"))) {
      write("small.txt", std::string(400, 'a') + "the quick brown fox ");
      EXPECT_EQ(run_binary("--device cpu --hidden-dim 16 --num-layers 1 --num-heads 2 --seq-len 8 --batch-size 2 "
                           "--num-steps 1 --data " + p("small.txt") + " --save " + p("m.st"), dir).exit_code, 0);
      EXPECT_EQ(run_binary("export " + p("m.st") + " --hf " + p("hf"), dir).exit_code, 0);
      fs::remove(p("hf/tokenizer_config.json"));
    }
    json t = json::parse(bytes(p("hf/tokenizer.json")));
    if (pattern == "gpt2") {
      t["pre_tokenizer"]["use_regex"] = true;
    } else {
      const std::string llama3 = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
      t["pre_tokenizer"] = {{"type", "Sequence"},
                            {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", llama3}}}, {"behavior", "Isolated"}, {"invert", false}},
                                               {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
    }
    int next = 256;
    for (const auto& [l, r] : std::vector<std::pair<std::string, std::string>>{
             {"\u0120", "t"}, {"h", "e"}, {"\u0120t", "he"}, {"i", "n"}, {"e", "r"}, {"\u0120", "a"}, {"o", "n"}, {"1", "2"}}) {
      t["model"]["vocab"][l + r] = next++;
      t["model"]["merges"].push_back({l, r});
    }
    t["added_tokens"] = {{{"id", next}, {"content", "<|endoftext|>"}, {"single_word", false}, {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}}};
    const std::string path = p(pattern + ".json");
    write(pattern + ".json", t.dump());
    return path;
  }
  ScratchDir scratch_{"tok"};
  const fs::path dir = scratch_.path();
};

// Text of words, numbers, punctuation, contractions, runs of spaces and line breaks, tabs and
// non-ASCII letters: `n` bytes.
std::string varied_text(size_t n, unsigned seed) {
  static const char* pieces[] = {"the", "The", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "caf\xc3\xa9",
                                 "\xe4\xb8\xad\xe6\x96\x87", "12", "12345", "it's", "we'll", "they'RE", "--", "...",
                                 "(a)", "\"q\"", "\xf0\x9f\x99\x82", "end."};
  static const char* gaps[] = {" ", " ", " ", " ", "  ", "\n", "\n\n", "\t", " \n ", ", ", ". "};
  std::mt19937 rng(seed);
  std::string s;
  while (s.size() < n) s += std::string(pieces[rng() % 22]) + gaps[rng() % 11];
  return s;
}

// One document of 3.5 MiB is cut into pieces (at most 1 MiB each): its tokens are those of the
// whole document encoded at once.
TEST_F(Tokenize, APieceAtATimeEncodesAsTheWholeDocument) {
  const std::string text = varied_text(size_t(7) << 19, 1);
  write("doc.txt", text);
  write("sample.txt", text.substr(0, 200000));
  ASSERT_EQ(run_binary("tokenizer-train --vocab-size 400 --out " + p("sp") + " " + p("sample.txt"), dir).exit_code, 0);
  for (const std::string& spec : {p("sp.model"), bpe_tokenizer("gpt2"), bpe_tokenizer("llama3")}) {
    SCOPED_TRACE(spec);
    fs::remove_all(p("out"));
    const Outcome r = run_binary("tokenize --val-fraction 0 --tokenizer " + spec + " --out " + p("out") + " " + p("doc.txt"), dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto tok = Tokenizer::load(spec, "--tokenizer");
    std::vector<int32_t> want;
    if (tok->bos() >= 0 && tok->bos() != tok->eos()) want.push_back(tok->bos());
    const std::vector<int32_t> body = tok->encode(text);
    want.insert(want.end(), body.begin(), body.end());
    want.push_back(tok->eos());
    const std::vector<int32_t> got = tokens("out/train_000000.bin", tok->vocab_size());
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(got == want);
  }
}

// 1 GB as one document took 2.1 GB; SentencePiece on a line without spaces 200 bytes per byte (5 GB
// for 25 MB); one long word 31 bytes per byte in the byte-level BPE. Pieces bound them all.
TEST_F(Tokenize, MemoryIsBoundedPerDocument) {
  write("sample.txt", varied_text(100000, 2));
  ASSERT_EQ(run_binary("tokenizer-train --vocab-size 400 --out " + p("sp") + " " + p("sample.txt"), dir).exit_code, 0);
  // What the program holds before any document (the libraries: about 230 MB in a CUDA build).
  write("tiny.txt", "a few words");
  const long base_kb = run_binary("tokenize --tokenizer " + p("sp.model") + " --out " + p("t") + " " + p("tiny.txt"), dir).peak_kb;
  std::string no_spaces;
  for (std::mt19937 rng(3); no_spaces.size() < (size_t(8) << 20);) no_spaces += "thequickbrownfoxjumpsoverthelazydog"[rng() % 35];
  write("line.txt", no_spaces);
  Outcome r = run_binary("tokenize --tokenizer " + p("sp.model") + " --out " + p("a") + " " + p("line.txt"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(r.peak_kb - base_kb, 300 * 1024) << "peak resident kB above the start, SentencePiece on 8 MB without a space";
  write("word.txt", std::string(size_t(16) << 20, 'a'));
  r = run_binary("tokenize --tokenizer " + bpe_tokenizer("gpt2") + " --out " + p("b") + " " + p("word.txt"), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(r.peak_kb - base_kb, 100 * 1024) << "peak resident kB above the start, a word of 16 MB in the byte-level BPE";
  // What still does not fit (a JSON-lines record is read whole) names tokenize's remedy.
  write("record.jsonl", json{{"text", std::string(size_t(100) << 20, 'x')}}.dump() + "\n");
  // The address space allowed: what the program maps at start (its libraries: 1.3 GB in a CUDA
  // build) and 150 MB, less than a copy and a parse of the record.
  r = run_binary("tokenize --out " + p("c") + " " + p("record.jsonl"), dir,
                 "ulimit -v " + std::to_string(base_vm_kb() + 150 * 1024) + "; ");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("tokenize: out of memory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("give fewer --threads, or split the largest records"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(p("c")));
}

// --threads 1024 held 4 MB of text per thread, a batch of 4 GB: all of a smaller corpus at once, its
// tokens 4 bytes each. The batch is 16 MiB whatever the threads: memory does not grow with the corpus.
TEST_F(Tokenize, ThreadsDoNotGrowTheBatch) {
  long peak[2] = {};
  for (const int mb : {24, 72}) {
    std::string lines;
    for (std::mt19937 rng(4); lines.size() < (size_t(mb) << 20);) {
      std::string line = varied_text(200 + rng() % 2000, rng());
      std::replace(line.begin(), line.end(), '\n', ' ');  // documents of a line each, not of a few words
      lines += line + "\n";
    }
    write("lines.txt", lines);
    fs::remove_all(p("out"));
    const Outcome r = run_binary("tokenize --threads 1024 --documents line --out " + p("out") + " " + p("lines.txt"), dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    peak[mb == 72] = r.peak_kb;
  }
  EXPECT_LT(peak[1], peak[0] + 50 * 1024) << "peak resident kB for 24 MB: " << peak[0] << ", for 72 MB: " << peak[1];
}

std::string gzip(const std::string& text) {
  std::string out(compressBound(uLong(text.size())) + 64, '\0');
  z_stream zs{};
  deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);  // 16: gzip's header
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data())), zs.avail_in = uInt(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data()), zs.avail_out = uInt(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string zstd(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3));
  return out;
}

// Plain, gzip (two members, as `cat a.gz b.gz` makes), Zstandard, and standard input: the same
// shards; text files and JSON lines alike. Corrupt and truncated data are refused.
TEST_F(Tokenize, CompressedAndPipedInputGiveTheSameShards) {
  const std::string text = varied_text(size_t(3) << 20, 5);
  write("c.txt", text);
  write("c.txt.gz", gzip(text.substr(0, 1000000)) + gzip(text.substr(1000000)));
  write("c.txt.zst", zstd(text));
  std::string records;
  for (unsigned i = 0; records.size() < (size_t(2) << 20); ++i) records += json{{"text", varied_text(5000, i)}}.dump() + "\n";
  write("r.jsonl", records);
  write("r.jsonl.zst", zstd(records));
  write("r.jsonl.gz", gzip(records));
  auto shards = [&](const std::string& out, const std::string& args, const std::string& prefix = "") {
    const Outcome r = run_binary("tokenize --out " + p(out) + " " + args, dir, prefix);
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.err;
    return bytes(p(out + "/train_000000.bin")) + bytes(p(out + "/val_000000.bin"));
  };
  const std::string plain = shards("plain", p("c.txt"));
  ASSERT_GT(plain.size(), text.size());
  EXPECT_TRUE(shards("gz", p("c.txt.gz")) == plain);
  EXPECT_TRUE(shards("zst", p("c.txt.zst")) == plain);
  EXPECT_TRUE(shards("pipe", "- < " + p("c.txt")) == plain);
  EXPECT_TRUE(shards("pipe-zst", "-", "cat " + p("c.txt.zst") + " | ") == plain);
  const std::string jsonl = shards("jsonl", p("r.jsonl"));
  EXPECT_TRUE(shards("jsonl-zst", p("r.jsonl.zst")) == jsonl);
  EXPECT_TRUE(shards("jsonl-gz", p("r.jsonl.gz")) == jsonl);
  EXPECT_TRUE(shards("jsonl-pipe", "--documents jsonl -", "cat " + p("r.jsonl") + " | ") == jsonl);
  const std::string zipped = gzip(text);
  write("cut.gz", zipped.substr(0, zipped.size() / 2));
  Outcome r = run_binary("tokenize --out " + p("cut") + " " + p("cut.gz"), dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'" + p("cut.gz") + "' is not valid gzip data: it ends inside a compressed stream (truncated?)"),
            std::string::npos) << r.err;
  std::string bad = zstd(text);
  bad[bad.size() / 2] ^= 0x55;
  write("bad.zst", bad);
  r = run_binary("tokenize --out " + p("bad") + " " + p("bad.zst"), dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is not valid zstd data"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(p("cut")));
  EXPECT_FALSE(fs::exists(p("bad")));
}

// Three documents of 10,000, 500 and 300 bytes: the 10% asked for is 1,080 tokens. The large one
// drawn first used to validate alone (93% of the tokens, exit 0); now documents are taken while
// they bring validation nearer the fraction, and a line says how near it came and why.
TEST_F(Tokenize, ValidationDocumentsStayNearTheFraction) {
  write("big.txt", std::string(10000, 'b'));
  write("mid.txt", std::string(500, 'm'));
  write("small.txt", std::string(300, 's'));
  for (const int seed : {1, 2, 3, 4, 5}) {
    SCOPED_TRACE(seed);
    const std::string out = "out" + std::to_string(seed);
    const Outcome r = run_binary("tokenize --val-split docs --seed " + std::to_string(seed) + " --out " + p(out) + " " +
                                     p("big.txt") + " " + p("mid.txt") + " " + p("small.txt"), dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("800 to validate"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Validation holds 7.4% of the tokens, not the 10.0% of --val-fraction: 3 documents are too few "
                         "or too unequal to come nearer"), std::string::npos) << r.out;
  }
}

// A full disk (a 1 MB file system) while the shards are written: one line saying so, exit 1, and
// no shard left; a shard without the manifest (a run killed before writing it), or changed since,
// is refused by training; temporaries of runs that died go at the next run.
TEST_F(Tokenize, FailedRunsLeaveNothingATrainingRunAccepts) {
  write("c.txt", varied_text(300000, 6));
  fs::create_directories(p("small"));
  const std::string script = "mount -t tmpfs -o size=1m tmpfs " + p("small") + " && " + TT_BINARY +
                             " tokenize --shard-tokens 100000 --out " + p("small/out") + " " + p("c.txt") + " >" +
                             p("full.out") + " 2>" + p("full.err") + "; echo $? >" + p("full.rc") + "; ls -a " + p("small/out") +
                             " >" + p("left.txt") + " 2>&1";
  if (std::system(("unshare -rm sh -c 'mount -t tmpfs -o size=1m tmpfs " + p("small") + "' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "no mount namespace here (unshare -rm) for a small file system";
  }
  std::system(("unshare -rm sh -c '" + script + "'").c_str());
  EXPECT_EQ(bytes(p("full.rc")), "1\n") << bytes(p("full.err"));
  EXPECT_NE(bytes(p("full.err")).find("disk full"), std::string::npos) << bytes(p("full.err"));
  EXPECT_EQ(bytes(p("left.txt")).find(".bin"), std::string::npos) << "shards left: " << bytes(p("left.txt"));

  const std::string train = std::string("--device cpu --hidden-dim 16 --num-layers 1 --num-heads 2 --seq-len 8 --batch-size 2 "
                                        "--num-steps 1 --vocab-size 256 --data '") + p("out") + "/*.bin'";
  ASSERT_EQ(run_binary("tokenize --out " + p("out") + " " + p("c.txt"), dir).exit_code, 0);
  EXPECT_EQ(run_binary(train, dir).exit_code, 0);
  fs::rename(p("out/manifest.json"), p("manifest.json"));
  Outcome r = run_binary(train, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("train_000000.bin' was written by a tokenize run that did not finish"), std::string::npos) << r.err;
  fs::rename(p("manifest.json"), p("out/manifest.json"));
  {  // five tokens of a million-token corpus changed, each still in the vocabulary (R14: resumed silently)
    std::fstream f(p("out/train_000000.bin"), std::ios::in | std::ios::out | std::ios::binary);
    for (int k = 1; k <= 5; ++k) f.seekp(1024 + 2 * 40000 * k), f.put('x');
  }
  r = run_binary(train, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("train_000000.bin' has changed since tokenize wrote it"), std::string::npos) << r.err;

  // A dead process's encoded tokens and shard temporary go; a living one's stay.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  fs::create_directories(p("again"));
  for (const std::string& name : {".tokens.tmp." + std::to_string(dead), "train_000000.bin.tmp." + std::to_string(dead),
                                  ".tokens.tmp." + std::to_string(::getpid())})
    write("again/" + name, std::string(1000, 'x'));
  ASSERT_EQ(run_binary("tokenize --out " + p("again") + " " + p("c.txt"), dir).exit_code, 0);
  EXPECT_FALSE(fs::exists(p("again/.tokens.tmp." + std::to_string(dead))));
  EXPECT_FALSE(fs::exists(p("again/train_000000.bin.tmp." + std::to_string(dead))));
  EXPECT_TRUE(fs::exists(p("again/.tokens.tmp." + std::to_string(::getpid()))));
}

// tokenize --help and tokenizer-train --help say what they take.
TEST_F(Tokenize, HelpSaysWhatItTakes) {
  for (const char* command : {"tokenize", "tokenizer-train"}) {
    const Outcome r = run_binary(std::string(command) + " --help", dir);
    EXPECT_EQ(r.exit_code, 0);
    for (const char* words : {"directories of them (recursively)", "JSON-lines files (.jsonl, .ndjson, .json: a document a record)",
                              "compressed (.gz, .zst)", "- for standard input", "--documents", "a document a line (line)",
                              "--text-field"})
      EXPECT_NE(r.out.find(words), std::string::npos) << command << ": " << words << "\n" << r.out;
  }
}

// tokenizer-train takes what tokenize takes: a directory, JSON lines and compressed files give the
// model of the same text as one plain file, and so does standard input. Lines SentencePiece would
// drop without a word (longer than 4192 bytes; holding U+2047) are cut and said: the words only
// they hold become pieces. --input-sentence-size samples with --seed; a terminal sees progress.
TEST_F(Tokenize, TokenizerTrainTakesTheCorpusTokenizeTakes) {
  const std::string text = varied_text(200000, 7);
  std::string long_lines;  // lines of 12,000 bytes, their words nowhere else
  for (int line = 0; line < 20; ++line) {
    for (int w = 0; long_lines.size() < size_t(12000) * (line + 1); ++w) long_lines += w % 3 ? "zebra " : "quagga ";
    long_lines.back() = '\n';
  }
  const std::string reserved = "kept \xE2\x81\x87 around\n";
  const std::string all = text + "\n" + long_lines + reserved;
  write("all.txt", all);
  fs::create_directories(p("corpus/sub"));
  write("corpus/a.txt.gz", gzip(text + "\n"));
  write("corpus/sub/b.jsonl.zst", zstd(json{{"text", long_lines}}.dump() + "\n" + json{{"text", reserved}}.dump() + "\n"));
  auto model = [&](const std::string& out, const std::string& args, const std::string& prefix = "") {
    const Outcome r = run_binary("tokenizer-train --vocab-size 400 --out " + p(out) + " " + args, dir, prefix);
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.err;
    EXPECT_EQ(r.err, "") << "no progress without a terminal";
    return std::make_pair(bytes(p(out + ".model")), r.out);
  };
  const auto [plain, said] = model("plain", p("all.txt"));
  EXPECT_NE(said.find("20 lines longer than 4192 bytes (SentencePiece's longest sentence: it drops longer lines) were cut "
                      "at spaces into sentences"), std::string::npos) << said;
  EXPECT_NE(said.find("U+2047, which SentencePiece reserves (it drops a line holding it), was left out 1 time(s)"),
            std::string::npos) << said;
  EXPECT_NE(bytes(p("plain.vocab")).find("\xE2\x96\x81quagga\t"), std::string::npos) << "the long lines' words are learned";
  EXPECT_EQ(model("dir", p("corpus")).first, plain) << "a directory of .gz and JSON lines in .zst";
  EXPECT_EQ(model("pipe", "-", "cat " + p("all.txt") + " | ").first, plain);

  const auto [sampled, sampled_said] = model("s1", "--input-sentence-size 300 --seed 1 " + p("all.txt"));
  EXPECT_NE(sampled_said.find("Learned from 300 of the "), std::string::npos) << sampled_said;
  EXPECT_NE(sampled, plain);
  EXPECT_EQ(model("s1again", "--input-sentence-size 300 --seed 1 " + p("all.txt")).first, sampled);
  EXPECT_NE(model("s2", "--input-sentence-size 300 --seed 2 " + p("all.txt")).first, sampled);

  // On a terminal (script(1) gives the command one), a progress line on stderr.
  if (std::system("command -v script >/dev/null 2>&1") == 0) {
    const std::string command = std::string(TT_BINARY) + " tokenizer-train --vocab-size 400 --out " + p("tty") + " " + p("all.txt");
    ASSERT_EQ(std::system(("script -qec '" + command + "' /dev/null >" + p("tty.out")).c_str()), 0);
    const std::string shown = bytes(p("tty.out"));
    EXPECT_NE(shown.find("\rtokenizer-train: 0.4 MB read of 0.4, "), std::string::npos) << shown;
    EXPECT_NE(shown.find(" lines: SentencePiece learns its pieces"), std::string::npos) << shown;
  }

  // Refused before any output: a file that is not text, a bad sample size or document format.
  write("nul.txt", std::string("text\0more", 9));
  for (const auto& [args, words] : std::vector<std::pair<std::string, std::string>>{
           {p("nul.txt"), "'" + p("nul.txt") + "' is not text (it holds a NUL byte)"},
           {"--input-sentence-size -1 " + p("all.txt"), "--input-sentence-size: 0 (every sentence) or more"},
           {"--documents lines " + p("all.txt"), "--documents: file, line or jsonl (got 'lines')"},
           {p("missing"), "tokenizer-train: '" + p("missing") + "' is not a regular file or a directory"}}) {
    const Outcome r = run_binary("tokenizer-train --vocab-size 400 --out " + p("bad") + " " + args, dir);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(p("bad.model")));
  }
}

}  // namespace
}  // namespace tt::test
