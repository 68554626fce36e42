#include "data/tokenize.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>
#include <iostream>
#include <exception>
#include <thread>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "core/files.h"
#include "core/json_input.h"
#include "core/rng.h"
#include "data/token_file.h"
#include "data/tokenizer.h"

namespace tt {

namespace {

namespace fs = std::filesystem;

// The inputs as files: a directory's regular files, recursively, in name order.
std::vector<std::string> input_files(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(in, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec))
        if (it->is_regular_file(ec)) found.push_back(it->path().string());
      if (ec) usage_fail("tokenize: cannot read the directory '" + in + "': " + ec.message());
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
      continue;
    }
    struct stat st {};
    if (::stat(in.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      usage_fail("tokenize: '" + in + "' is not a regular file or a directory (or does not exist)");
    files.push_back(in);
  }
  if (files.empty()) usage_fail("tokenize: the inputs hold no file");
  return files;
}

bool is_json_lines(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  return ext == ".jsonl" || ext == ".ndjson" || ext == ".json";
}

// The documents of the inputs, one at a time: a text file whole or a line at a time (empty lines
// are no document), a JSON-lines file a record at a time (its text field). Text holds no NUL byte.
class Documents {
 public:
  Documents(std::vector<std::string> files, const TokenizeOptions& o) : files_(std::move(files)), o_(o) {}
  bool next(std::string& doc) {
    for (;;) {
      if (!in_.is_open()) {
        if (file_ == files_.size()) return false;
        in_.open(files_[file_], std::ios::binary);
        if (!in_) usage_fail("tokenize: cannot read '" + files_[file_] + "'");
        line_ = 0;
      }
      const std::string& path = files_[file_];
      const bool json = is_json_lines(path);
      if (!json && o_.documents == "file") {
        doc.assign(std::istreambuf_iterator<char>(in_), std::istreambuf_iterator<char>());
        if (in_.bad()) usage_fail("tokenize: error while reading '" + path + "'");
        close();
        check_text(doc, path, 0);
        return true;
      }
      if (!std::getline(in_, doc)) {
        if (in_.bad()) usage_fail("tokenize: error while reading '" + path + "'");
        close();
        continue;
      }
      ++line_;
      if (doc.empty()) continue;
      if (json) doc = record_text(doc, path);
      check_text(doc, path, line_);
      if (!doc.empty()) return true;
    }
  }

 private:
  void close() { in_.close(), in_.clear(), ++file_; }
  std::string where(const std::string& path, int64_t line) const {
    return "'" + path + "'" + (line ? " line " + std::to_string(line) : "");
  }
  void check_text(const std::string& text, const std::string& path, int64_t line) const {
    if (text.find('\0') != std::string::npos) usage_fail("tokenize: " + where(path, line) + " is not text (it holds a NUL byte)");
  }
  std::string record_text(const std::string& line, const std::string& path) const {
    const nlohmann::json record = parse_json_input(line, "tokenize: " + where(path, line_));
    if (!record.is_object())
      usage_fail("tokenize: " + where(path, line_) + " is not a JSON object (a JSON-lines file holds one a line)");
    const auto it = record.find(o_.text_field);
    if (it == record.end() || !it->is_string())
      usage_fail("tokenize: " + where(path, line_) + " has no string field \"" + o_.text_field + "\" (--text-field)");
    return it->get<std::string>();
  }

  std::vector<std::string> files_;
  const TokenizeOptions& o_;
  size_t file_ = 0;
  int64_t line_ = 0;
  std::ifstream in_;
};

// Every document's tokens, BOS first (unless it is EOS) and EOS last where the tokenizer has them, in the width of
// the shards, written in input order to one temporary file as batches of documents are encoded
// in parallel (each thread a share of the batch). Keeps where each document starts.
struct Encoded {
  std::string path;
  bool wide;
  int64_t tokens = 0;
  std::vector<int64_t> doc_start;  // and the total at the end
  size_t bytes = 0;
};

void encode_all(Documents& docs, const Tokenizer& tok, int threads, size_t total_bytes, Encoded& e) {
  std::ofstream out(e.path, std::ios::binary | std::ios::trunc);
  if (!out) fail("tokenize: cannot write '" + e.path + "'");
  const size_t batch_bytes = size_t(threads) * (size_t(4) << 20);
  std::vector<std::string> batch;
  std::vector<std::vector<int32_t>> ids;
  const auto start = std::chrono::steady_clock::now();
  auto last_report = start;
  const bool progress = ::isatty(2);
  const int bos = tok.bos() != tok.eos() ? tok.bos() : -1;  // one token both ends and starts (GPT-2's): once
  auto flush = [&] {
    ids.assign(batch.size(), {});
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        try {
          for (size_t i = size_t(t); i < batch.size(); i += size_t(threads)) {
            std::vector<int32_t>& d = ids[i];
            if (bos >= 0) d.push_back(bos);
            const std::vector<int32_t> body = tok.encode(batch[i]);
            d.insert(d.end(), body.begin(), body.end());
            if (tok.eos() >= 0) d.push_back(tok.eos());
          }
        } catch (...) {
          errors[size_t(t)] = std::current_exception();
        }
      });
    for (std::thread& th : pool) th.join();
    for (const std::exception_ptr& err : errors)
      if (err) std::rethrow_exception(err);
    for (const std::vector<int32_t>& d : ids) {
      e.doc_start.push_back(e.tokens);
      if (e.wide) {
        out.write(reinterpret_cast<const char*>(d.data()), std::streamsize(d.size() * 4));
      } else {
        const std::vector<uint16_t> narrow(d.begin(), d.end());
        out.write(reinterpret_cast<const char*>(narrow.data()), std::streamsize(narrow.size() * 2));
      }
      e.tokens += int64_t(d.size());
    }
    if (!out) fail("tokenize: error while writing '" + e.path + "' (disk full?)");
    batch.clear();
    const auto now = std::chrono::steady_clock::now();
    if (progress && now - last_report > std::chrono::seconds(2)) {
      const double s = std::chrono::duration<double>(now - start).count();
      std::cerr << fmt::format("\rtokenize: {:.0f} of {:.0f} MB, {} tokens, {:.1f} MB/s", e.bytes / 1e6,
                               total_bytes / 1e6, e.tokens, e.bytes / 1e6 / s)
                << std::flush;
      last_report = now;
    }
  };
  std::string doc;
  size_t pending = 0;
  while (docs.next(doc)) {
    e.bytes += doc.size();
    pending += doc.size();
    batch.push_back(std::move(doc));
    if (pending >= batch_bytes) flush(), pending = 0;
  }
  flush();
  if (progress && std::chrono::steady_clock::now() - start > std::chrono::seconds(2)) std::cerr << "\n";
  e.doc_start.push_back(e.tokens);
  out.close();
  if (!out) fail("tokenize: error while writing '" + e.path + "' (disk full?)");
}

// Writes the ranges [begin, end) of the encoded tokens, in order, as shards prefix_000000.bin, ...
// of at most shard_tokens each, read back a million tokens at a time; returns how many.
int write_shards(const std::string& dir, const std::string& prefix, const Encoded& e,
                 const std::vector<std::pair<int64_t, int64_t>>& ranges, int64_t shard_tokens) {
  std::ifstream in(e.path, std::ios::binary);
  const int64_t width = e.wide ? 4 : 2;
  std::vector<char> buf;
  std::unique_ptr<TokenFileWriter> shard;
  int shards = 0;
  for (auto [begin, end] : ranges)
    for (int64_t at = begin; at < end;) {
      if (!shard || shard->size() == shard_tokens)  // the full one was finished below
        shard = std::make_unique<TokenFileWriter>(
            (fs::path(dir) / fmt::format("{}_{:06d}.bin", prefix, shards++)).string(), e.wide);
      const int64_t n = std::min({end - at, shard_tokens - shard->size(), int64_t(1) << 20});
      buf.resize(size_t(n * width));
      in.seekg(at * width);
      in.read(buf.data(), std::streamsize(buf.size()));
      if (!in) fail("tokenize: cannot read back '" + e.path + "'");
      shard->append_raw(buf.data(), n);
      at += n;
      if (shard->size() == shard_tokens) shard->finish();
    }
  if (shard && shard->size() < shard_tokens) shard->finish();
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
  if (o.documents != "file" && o.documents != "line")
    usage_fail("--documents: file or line (got '" + o.documents + "')");
  if (o.threads < 0 || o.threads > 1024) usage_fail("--threads: 0 (every core) to 1024");
  std::error_code ec;
  check_writable_directory(o.out_dir, "--out");  // before any work
  if (fs::is_directory(o.out_dir, ec))
    for (const auto& e : fs::directory_iterator(o.out_dir, ec))
      if (e.path().extension() == ".bin")
        usage_fail("--out: '" + o.out_dir + "' already holds token files (" + e.path().filename().string() +
                   "): choose an empty directory, so that old shards do not mix with new ones");
  const std::unique_ptr<Tokenizer> tok = Tokenizer::load(o.tokenizer, "--tokenizer");
  const std::vector<std::string> files = input_files(o.inputs);
  size_t total_bytes = 0;
  for (const std::string& f : files) total_bytes += size_t(fs::file_size(f, ec));
  const int threads = o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));

  const bool created = !fs::exists(o.out_dir, ec);
  fs::create_directories(o.out_dir, ec);
  if (ec) usage_fail("--out: cannot create '" + o.out_dir + "': " + ec.message());
  Encoded e;
  e.path = (fs::path(o.out_dir) / (".tokens.tmp." + std::to_string(::getpid()))).string();
  e.wide = tok->vocab_size() > 65536;
  struct Cleanup {  // the temporary file goes whatever happens, and a directory made for a refused run
    const std::string& path;
    const std::string& dir;
    bool remove_dir;
    ~Cleanup() {
      std::remove(path.c_str());
      std::error_code ignored;
      if (remove_dir) fs::remove(dir, ignored);  // only while empty
    }
  } cleanup{e.path, o.out_dir, created};
  Documents docs(files, o);
  const auto start = std::chrono::steady_clock::now();
  encode_all(docs, *tok, threads, total_bytes, e);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t total = e.tokens, ndocs = int64_t(e.doc_start.size()) - 1;
  int64_t val = int64_t(std::floor(double(total) * o.val_fraction));
  if (total - val == 0) usage_fail("tokenize: the inputs hold no text (" + std::to_string(total) + " tokens)");

  // The split: the last tokens, or documents in an order drawn from the seed until they hold the
  // fraction (each split then in input order).
  std::vector<std::pair<int64_t, int64_t>> train_ranges = {{0, total - val}}, val_ranges = {{total - val, total}};
  if (o.val_split == "docs") {
    const CounterRng rng(o.seed, kStreamValidation);
    std::vector<bool> validates(size_t(ndocs), false);
    int64_t held = 0;
    for (uint64_t i = 0; i < uint64_t(ndocs) && held < val; ++i) {
      const size_t d = size_t(permuted_index(i, uint64_t(ndocs), rng, 0));
      const int64_t n = e.doc_start[d + 1] - e.doc_start[d];
      if (held + n >= total) continue;  // some text must train
      validates[d] = true;
      held += n;
    }
    train_ranges.clear(), val_ranges.clear();
    for (size_t d = 0; d < size_t(ndocs); ++d)
      (validates[d] ? val_ranges : train_ranges).emplace_back(e.doc_start[d], e.doc_start[d + 1]);
    val = held;
  }
  cleanup.remove_dir = false;
  const int train_shards = write_shards(o.out_dir, "train", e, train_ranges, o.shard_tokens);
  const int val_shards = val > 0 ? write_shards(o.out_dir, "val", e, val_ranges, o.shard_tokens) : 0;
  log << fmt::format("Tokenizer: {}\n", tok->describe());
  log << fmt::format("{} files, {} documents, {} bytes -> {} tokens: {} to train in {} shard(s), {} to validate{} in {} "
                     "shard(s), in {}\n",
                     files.size(), ndocs, e.bytes, total, total - val, train_shards, val,
                     o.val_split == "docs" ? fmt::format(" (documents drawn with seed {})", o.seed) : "", val_shards,
                     o.out_dir);
  if (tok->eos() >= 0)
    log << fmt::format("Each document is {}its tokens and EOS ({}) last\n",
                       tok->bos() >= 0 && tok->bos() != tok->eos() ? fmt::format("BOS ({}) first, ", tok->bos()) : "",
                       tok->eos());
  log << fmt::format("{:.1f} MB of text in {:.2f} s: {:.1f} MB/s on {} thread(s)\n", e.bytes / 1e6, seconds,
                     e.bytes / 1e6 / std::max(seconds, 1e-9), threads);
  log << fmt::format("Train on them with: --data '{}/*.bin' --vocab-size {}\n", o.out_dir, tok->vocab_size());
}

void run_tokenizer_train(const TokenizerTrainOptions& o, std::ostream& log) {
  if (o.prefix.empty()) usage_fail("--out: give the prefix of the model files (writes PREFIX.model, PREFIX.vocab)");
  train_sentencepiece(o.inputs, o.vocab_size, o.prefix, o.model_type);
  const std::unique_ptr<Tokenizer> tok = Tokenizer::load(o.prefix + ".model", "--out");
  log << fmt::format("Wrote {0}.model and {0}.vocab: {1}\n", o.prefix, tok->describe());
}

}  // namespace tt
