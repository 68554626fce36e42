#include "data/tokenize.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "core/files.h"
#include "core/rng.h"
#include "data/token_file.h"
#include "data/tokenizer.h"

namespace tt {

namespace {

std::string read_text(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    usage_fail("tokenize: '" + path + "' is not a regular file (or does not exist)");
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) usage_fail("tokenize: error while reading '" + path + "'");
  if (text.find('\0') != std::string::npos) usage_fail("tokenize: '" + path + "' is not text (it holds a NUL byte)");
  return text;
}

// Writes tokens [begin, end) as shards named prefix_000000.bin, ...; returns how many.
int write_shards(const std::string& dir, const std::string& prefix, const std::vector<int32_t>& tokens, int64_t begin,
                 int64_t end, int64_t shard_tokens) {
  int shards = 0;
  for (int64_t at = begin; at < end; at += shard_tokens, ++shards) {
    const int64_t stop = std::min(end, at + shard_tokens);
    write_token_file((std::filesystem::path(dir) / fmt::format("{}_{:06d}.bin", prefix, shards)).string(),
                     std::vector<int32_t>(tokens.begin() + at, tokens.begin() + stop));
  }
  return shards;
}

}  // namespace

void run_tokenize(const TokenizeOptions& o, std::ostream& log) {
  if (o.inputs.empty()) usage_fail("tokenize: give the text files to tokenize");
  if (o.out_dir.empty()) usage_fail("--out: give the directory for the token files");
  if (!(std::isfinite(o.val_fraction) && o.val_fraction >= 0 && o.val_fraction < 1))
    usage_fail("--val-fraction: must be in [0, 1)");
  if (o.shard_tokens <= 0 || o.shard_tokens > INT32_MAX) usage_fail("--shard-tokens: must be in [1, 2147483647]");
  if (o.val_split != "last" && o.val_split != "docs") usage_fail("--val-split: last or docs (got '" + o.val_split + "')");
  namespace fs = std::filesystem;
  std::error_code ec;
  check_writable_directory(o.out_dir, "--out");  // before any work
  if (fs::is_directory(o.out_dir, ec))
    for (const auto& e : fs::directory_iterator(o.out_dir, ec))
      if (e.path().extension() == ".bin")
        usage_fail("--out: '" + o.out_dir + "' already holds token files (" + e.path().filename().string() +
                   "): choose an empty directory, so that old shards do not mix with new ones");
  const std::unique_ptr<Tokenizer> tok = Tokenizer::load(o.tokenizer, "--tokenizer");
  std::vector<std::string> texts;
  for (const std::string& f : o.inputs) texts.push_back(read_text(f));  // all read before anything is written

  std::vector<int32_t> tokens;
  std::vector<int64_t> doc_start;  // where each input's document begins in tokens
  for (const std::string& text : texts) {
    doc_start.push_back(int64_t(tokens.size()));
    if (tok->bos() >= 0) tokens.push_back(tok->bos());
    const std::vector<int32_t> ids = tok->encode(text);
    tokens.insert(tokens.end(), ids.begin(), ids.end());
  }
  doc_start.push_back(int64_t(tokens.size()));
  int64_t total = int64_t(tokens.size()), val = int64_t(std::floor(double(total) * o.val_fraction));
  if (total - val == 0) usage_fail("tokenize: the inputs hold no text (" + std::to_string(total) + " tokens)");
  if (o.val_split == "docs" && val > 0) {
    // Documents in an order drawn from the seed, to validation until they hold the fraction; then
    // the training documents and the validation ones, each in input order.
    const size_t docs = texts.size();
    const CounterRng rng(o.seed, kStreamValidation);
    std::vector<bool> validates(docs, false);
    int64_t held = 0;
    for (uint64_t i = 0; i < docs && held < val; ++i) {
      const size_t d = size_t(permuted_index(i, docs, rng, 0));
      if (held + (doc_start[d + 1] - doc_start[d]) >= total) continue;  // some text must train
      validates[d] = true;
      held += doc_start[d + 1] - doc_start[d];
    }
    std::vector<int32_t> ordered;
    for (bool v : {false, true})
      for (size_t d = 0; d < docs; ++d)
        if (validates[d] == v) ordered.insert(ordered.end(), tokens.begin() + doc_start[d], tokens.begin() + doc_start[d + 1]);
    tokens.swap(ordered);
    val = held;
  }
  fs::create_directories(o.out_dir, ec);
  if (ec) usage_fail("--out: cannot create '" + o.out_dir + "': " + ec.message());
  const int train_shards = write_shards(o.out_dir, "train", tokens, 0, total - val, o.shard_tokens);
  const int val_shards = write_shards(o.out_dir, "val", tokens, total - val, total, o.shard_tokens);
  log << fmt::format("Tokenizer: {}\n", tok->describe());
  log << fmt::format("{} files, {} bytes -> {} tokens: {} to train in {} shard(s), {} to validate{} in {} shard(s), in {}\n",
                     o.inputs.size(), [&] { size_t b = 0; for (const auto& t : texts) b += t.size(); return b; }(),
                     total, total - val, train_shards, val,
                     o.val_split == "docs" ? fmt::format(" (documents drawn with seed {})", o.seed) : "", val_shards,
                     o.out_dir);
  log << fmt::format("Train on them with: --data '{}/*.bin' --vocab-size {}\n", o.out_dir, tok->vocab_size());
}

void run_tokenizer_train(const TokenizerTrainOptions& o, std::ostream& log) {
  if (o.prefix.empty()) usage_fail("--out: give the prefix of the model files (writes PREFIX.model, PREFIX.vocab)");
  train_sentencepiece(o.inputs, o.vocab_size, o.prefix, o.model_type);
  const std::unique_ptr<Tokenizer> tok = Tokenizer::load(o.prefix + ".model", "--out");
  log << fmt::format("Wrote {0}.model and {0}.vocab: {1}\n", o.prefix, tok->describe());
}

}  // namespace tt
