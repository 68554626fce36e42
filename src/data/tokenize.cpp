#include "data/tokenize.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"
#include "core/files.h"
#include "core/json_input.h"
#include "core/rng.h"
#include "data/documents.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "data/tokenizer_files.h"

namespace tt {

namespace {

namespace fs = std::filesystem;

// Pieces (src/data/documents.h) are encoded in batches of kBatchBytes, shared among the threads
// (the batch does not grow with --threads).
constexpr size_t kBatchBytes = size_t(16) << 20;

// Every document's tokens, BOS first (unless it is EOS) and EOS last where the tokenizer has
// them, in the width of the shards, written in input order to one temporary file as batches of
// pieces are encoded in parallel (each thread a share of the batch). Keeps where each document
// starts.
struct Encoded {
  std::string path;
  bool wide;
  int64_t tokens = 0;
  std::vector<int64_t> doc_start;  // and the total at the end
  size_t bytes = 0;
};

void encode_all(Documents& docs, const Tokenizer& tok, int threads, uint64_t input_bytes, Encoded& e) {
  const int fd = ::open(e.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) fail("tokenize: cannot write '" + e.path + "': " + std::strerror(errno));
  struct Closed {
    int fd;
    ~Closed() { ::close(fd); }
  } closed{fd};
  std::vector<Piece> batch;
  std::vector<std::vector<int32_t>> ids;
  const auto start = std::chrono::steady_clock::now();
  auto last_report = start;
  const bool progress = ::isatty(2);
  const int bos = document_start(tok);
  auto flush = [&] {
    ids.assign(batch.size(), {});
    const size_t workers = std::min(size_t(threads), batch.size());
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> errors(workers);
    for (size_t t = 0; t < workers; ++t)
      pool.emplace_back([&, t] {
        try {
          for (size_t i = t; i < batch.size(); i += workers) {
            const Piece& p = batch[i];
            std::vector<int32_t>& d = ids[i];
            if (p.first && bos >= 0) d.push_back(bos);
            const std::vector<int32_t> body = p.first ? tok.encode(p.text) : tok.encode_more(p.text);
            d.insert(d.end(), body.begin(), body.end());
            if (p.last && tok.eos() >= 0) d.push_back(tok.eos());
          }
        } catch (...) {
          errors[t] = std::current_exception();
        }
      });
    for (std::thread& th : pool) th.join();
    for (const std::exception_ptr& err : errors)
      if (err) std::rethrow_exception(err);
    for (size_t i = 0; i < batch.size(); ++i) {
      const std::vector<int32_t>& d = ids[i];
      if (batch[i].first) e.doc_start.push_back(e.tokens);
      if (e.wide) {
        write_whole(fd, d.data(), d.size() * 4, e.path);
      } else {
        const std::vector<uint16_t> narrow(d.begin(), d.end());
        write_whole(fd, narrow.data(), narrow.size() * 2, e.path);
      }
      e.tokens += int64_t(d.size());
    }
    batch.clear(), ids.clear();
    const auto now = std::chrono::steady_clock::now();
    if (progress && now - last_report > std::chrono::seconds(2)) {
      const double s = std::chrono::duration<double>(now - start).count();
      std::cerr << fmt::format("\rtokenize: {:.0f} MB read{}, {} tokens, {:.1f} MB of text/s", docs.raw_bytes() / 1e6,
                               input_bytes ? fmt::format(" of {:.0f}", input_bytes / 1e6) : "", e.tokens, e.bytes / 1e6 / s)
                << std::flush;
      last_report = now;
    }
  };
  size_t pending = 0;
  for (Piece piece; docs.next(piece);) {
    e.bytes += piece.text.size();
    pending += piece.text.size() + sizeof(Piece) + 64;  // a piece's text, and what holds it and its tokens
    batch.push_back(std::move(piece));
    piece = Piece();
    if (pending >= kBatchBytes) flush(), pending = 0;
  }
  flush();
  if (progress && std::chrono::steady_clock::now() - start > std::chrono::seconds(2)) std::cerr << "\n";
  e.doc_start.push_back(e.tokens);
  if (::fsync(fd) != 0 && errno == ENOSPC) fail("tokenize: error while writing '" + e.path + "': disk full");
}

// Writes the ranges [begin, end) of the encoded tokens, in order, as shards prefix_000000.bin, ...
// of at most shard_tokens each, read back a million tokens at a time; adds each to `written`.
void write_shards(const std::string& dir, const std::string& prefix, const Encoded& e,
                  const std::vector<std::pair<int64_t, int64_t>>& ranges, int64_t shard_tokens,
                  std::vector<ShardRecord>& written) {
  const int fd = ::open(e.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("tokenize: cannot read back '" + e.path + "'");
  struct Closed {
    int fd;
    ~Closed() { ::close(fd); }
  } closed{fd};
  const int64_t width = e.wide ? 4 : 2;
  std::vector<char> buf;
  std::unique_ptr<TokenFileWriter> shard;
  std::string name;
  int shards = 0;
  auto finish = [&] {
    shard->finish();
    written.push_back({name, shard->size(), shard->hash()});
  };
  for (auto [begin, end] : ranges)
    for (int64_t at = begin; at < end;) {
      if (!shard || shard->size() == shard_tokens) {  // the full one was finished below
        name = fmt::format("{}_{:06d}.bin", prefix, shards++);
        shard = std::make_unique<TokenFileWriter>((fs::path(dir) / name).string(), e.wide, true);
      }
      const int64_t n = std::min({end - at, shard_tokens - shard->size(), int64_t(1) << 20});
      buf.resize(size_t(n * width));
      if (::pread(fd, buf.data(), buf.size(), off_t(at * width)) != ssize_t(buf.size()))
        fail("tokenize: cannot read back '" + e.path + "'");
      shard->append_raw(buf.data(), n);
      at += n;
      if (shard->size() == shard_tokens) finish();
    }
  if (shard && shard->size() < shard_tokens) finish();
}

// --val-split docs: documents in an order drawn from the seed, each taken when it brings the held
// tokens nearer to `target` (a large one drawn first no longer sends most of the corpus to
// validation), and never all of them: some text must train. Returns which validate.
std::vector<bool> validation_documents(const std::vector<int64_t>& doc_start, int64_t target, uint64_t seed) {
  const size_t ndocs = doc_start.size() - 1;
  const int64_t total = doc_start.back();
  const CounterRng rng(seed, kStreamValidation);
  std::vector<bool> validates(ndocs, false);
  int64_t held = 0;
  for (uint64_t i = 0; i < ndocs && held < target; ++i) {
    const size_t d = size_t(permuted_index(i, uint64_t(ndocs), rng, 0));
    const int64_t n = doc_start[d + 1] - doc_start[d];
    if (held + n >= total || std::llabs(held + n - target) >= target - held) continue;
    validates[d] = true;
    held += n;
  }
  return validates;
}

}  // namespace

void run_tokenize(const TokenizeOptions& o, std::ostream& log) {
  if (o.inputs.empty()) usage_fail("tokenize: give the text files to tokenize (or - for standard input)");
  if (o.out_dir.empty()) usage_fail("--out: give the directory for the token files");
  if (!(std::isfinite(o.val_fraction) && o.val_fraction >= 0 && o.val_fraction < 1))
    usage_fail("--val-fraction: must be in [0, 1)");
  if (o.shard_tokens <= 0 || o.shard_tokens > INT32_MAX) usage_fail("--shard-tokens: must be in [1, 2147483647]");
  if (o.val_split != "last" && o.val_split != "docs") usage_fail("--val-split: last or docs (got '" + o.val_split + "')");
  check_document_format({o.documents, o.text_field});
  if (o.threads < 0 || o.threads > 1024) usage_fail("--threads: 0 (every core) to 1024");
  std::error_code ec;
  check_writable_directory(o.out_dir, "--out");  // before any work
  if (fs::is_directory(o.out_dir, ec)) {
    // What killed runs left here (tokenize's encoded tokens, a shard's temporary) goes first.
    remove_stale_temporaries(o.out_dir, [](const std::string& base) {
      return base == ".tokens" || base == "tokenizer.model" || base == "tokenizer.json" ||
             base == "tokenizer_config.json" ||
             ((base.rfind("train_", 0) == 0 || base.rfind("val_", 0) == 0) && fs::path(base).extension() == ".bin");
    });
    for (const auto& e : fs::directory_iterator(o.out_dir, ec))
      if (e.path().extension() == ".bin")
        usage_fail("--out: '" + o.out_dir + "' already holds token files (" + e.path().filename().string() +
                   "): choose an empty directory, so that old shards do not mix with new ones");
  }
  const std::unique_ptr<Tokenizer> tok = Tokenizer::load(o.tokenizer, "--tokenizer");
  // Its files go beside the shards (the manifest records them), unless the same ones are there.
  const TokenizerFiles tok_files = tokenizer_files(*tok);
  std::vector<std::pair<std::string, const std::string*>> to_copy;
  for (const auto& [name, bytes] : tok_files.files) {
    const std::string there = (fs::path(o.out_dir) / name).string();
    if (!fs::exists(there, ec)) {
      to_copy.emplace_back(there, &bytes);
    } else if (!fs::is_regular_file(there, ec) || fs::file_size(there, ec) != bytes.size() ||
               read_input_file(there, "--out", bytes.size()) != bytes) {
      usage_fail("--out: '" + o.out_dir + "' holds a " + name + " that is not the tokenizer's (" + tok->describe() +
                 "), which tokenize copies beside the shards: choose an empty directory");
    }
  }
  const std::vector<std::string> files = input_files(o.inputs, "tokenize");
  const int threads = o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));

  const bool created = !fs::exists(o.out_dir, ec);
  fs::create_directories(o.out_dir, ec);
  if (ec) usage_fail("--out: cannot create '" + o.out_dir + "': " + ec.message());
  Encoded e;
  e.path = (fs::path(o.out_dir) / (".tokens.tmp." + std::to_string(::getpid()))).string();
  e.wide = tok->vocab_size() > 65536;
  std::vector<ShardRecord> written;
  std::vector<std::string> copied;  // the tokenizer's files
  // Whatever happens, the temporary file goes; a run that fails takes back its shards and copies
  // (the manifest, written last, is what makes them usable: a run killed before it leaves none a
  // training run accepts) and a directory it made.
  struct Cleanup {
    const Encoded& e;
    const std::string& dir;
    const std::vector<ShardRecord>& written;
    const std::vector<std::string>& copied;
    bool created, done = false;
    ~Cleanup() {
      std::remove(e.path.c_str());
      if (done) return;
      std::error_code ignored;
      for (const ShardRecord& s : written) fs::remove(fs::path(dir) / s.file, ignored);
      for (const std::string& c : copied) fs::remove(c, ignored);
      if (created) fs::remove(dir, ignored);  // only while empty
    }
  } cleanup{e, o.out_dir, written, copied, created};
  const auto start = std::chrono::steady_clock::now();
  Documents docs(files, {o.documents, o.text_field}, "tokenize");
  try {
    encode_all(docs, *tok, threads, input_bytes(files), e);
  } catch (const std::bad_alloc&) {
    fail(fmt::format("tokenize: out of memory with {} thread(s), each encoding a piece of at most {} MiB of a document "
                     "(batches of {} MiB; a JSON-lines record is read whole): give fewer --threads, or split the "
                     "largest records", threads, kPieceBytes >> 20, kBatchBytes >> 20));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t total = e.tokens, ndocs = int64_t(e.doc_start.size()) - 1;
  int64_t val = int64_t(std::floor(double(total) * o.val_fraction));
  if (total - val == 0) usage_fail("tokenize: the inputs hold no text (" + std::to_string(total) + " tokens)");

  // The split: the last tokens, or whole documents (each split then in input order).
  std::vector<std::pair<int64_t, int64_t>> train_ranges = {{0, total - val}}, val_ranges = {{total - val, total}};
  std::string split_note;
  if (o.val_split == "docs") {
    const std::vector<bool> validates = validation_documents(e.doc_start, val, o.seed);
    train_ranges.clear(), val_ranges.clear();
    int64_t held = 0;
    for (size_t d = 0; d < size_t(ndocs); ++d) {
      (validates[d] ? val_ranges : train_ranges).emplace_back(e.doc_start[d], e.doc_start[d + 1]);
      if (validates[d]) held += e.doc_start[d + 1] - e.doc_start[d];
    }
    if (std::llabs(held - val) > val / 10)  // more than a tenth off the fraction asked for: say so, and why
      split_note = fmt::format("Validation holds {:.1f}% of the tokens, not the {:.1f}% of --val-fraction: {} documents "
                               "are too few or too unequal to come nearer (--val-split last cuts tokens instead)\n",
                               100.0 * double(held) / double(total), 100 * o.val_fraction, ndocs);
    val = held;
  }
  write_shards(o.out_dir, "train", e, train_ranges, o.shard_tokens, written);
  const size_t train_shards = written.size();
  if (val > 0) write_shards(o.out_dir, "val", e, val_ranges, o.shard_tokens, written);
  for (const auto& [there, bytes] : to_copy) {
    copied.push_back(there);
    write_file_atomic(there, [&](std::ostream& out) { out << *bytes; });
  }
  write_shard_manifest(o.out_dir, written, tok->describe(), tok_files);
  cleanup.done = true;
  log << fmt::format("Tokenizer: {}\n", tok->describe());
  log << fmt::format("{} files, {} documents, {} bytes -> {} tokens: {} to train in {} shard(s), {} to validate{} in {} "
                     "shard(s), in {}\n",
                     files.size(), ndocs, e.bytes, total, total - val, train_shards, val,
                     o.val_split == "docs" ? fmt::format(" (documents drawn with seed {})", o.seed) : "",
                     written.size() - train_shards, o.out_dir);
  log << split_note;
  if (tok->eos() >= 0)
    log << fmt::format("Each document is {}its tokens and EOS ({}) last\n",
                       document_start(*tok) >= 0 ? fmt::format("BOS ({}) first, ", tok->bos()) : "",
                       tok->eos());
  log << fmt::format("{:.1f} MB of text in {:.2f} s: {:.1f} MB/s on {} thread(s)\n", e.bytes / 1e6, seconds,
                     e.bytes / 1e6 / std::max(seconds, 1e-9), threads);
  log << fmt::format("Train on them with: --data '{}/*.bin' --vocab-size {}\n", o.out_dir, tok->vocab_size());
}

}  // namespace tt
