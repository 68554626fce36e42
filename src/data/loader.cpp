#include "data/loader.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "core/files.h"
#include "core/rng.h"
#include "data/token_file.h"

namespace tt {

void DataSource::fill(Batch& b, bool validation, const std::function<int64_t(int)>& window_of) const {
  b.tokens.resize(size_t(B_) * T_);
  b.targets.resize(size_t(B_) * T_);
  std::vector<int32_t> w(size_t(T_) + 1);
  for (int i = 0; i < B_; ++i) {
    window(validation, window_of(i), w.data());
    std::copy(w.begin(), w.end() - 1, b.tokens.begin() + int64_t(i) * T_);
    std::copy(w.begin() + 1, w.end(), b.targets.begin() + int64_t(i) * T_);
  }
}

void DataSource::next_batch(Batch& b) {
  const int64_t count = train_windows();
  const CounterRng rng(shuffle_seed_, kStreamShuffle);
  fill(b, false, [&](int i) {  // this rank's B windows of the global batch, without overflow
    const int64_t at = position_ + (int64_t(shard_rank_) * B_ + i) % count;  // below 2 x count
    if (!shuffle_) return at % count;
    return int64_t(permuted_index(uint64_t(at % count), uint64_t(count), rng, uint64_t(epoch_ + at / count)));
  });
  const int64_t advance = int64_t(B_) * shard_count_;
  epoch_ = (epoch_ + (position_ + advance % count) / count + advance / count) % (int64_t(1) << 40);
  position_ = (position_ + advance % count) % count;  // both terms below count
}

void DataSource::next_batches(int n, Batch& b) {
  Batch one;
  b.tokens.clear(), b.targets.clear();
  for (int i = 0; i < n; ++i) {
    next_batch(one);
    b.tokens.insert(b.tokens.end(), one.tokens.begin(), one.tokens.end());
    b.targets.insert(b.targets.end(), one.targets.begin(), one.targets.end());
  }
}

void DataSource::validation_windows_batch(int64_t first, int rows, Batch& b) const {
  TT_CHECK(rows >= 1 && rows <= B_ && first >= 0 && first + rows <= all_validation_windows(),
           "validation_windows_batch: outside the validation split");
  fill(b, true, [&](int i) { return first + std::min(i, rows - 1); });  // the rows past `rows` repeat the last, uncounted
}

namespace {

class SyntheticData final : public DataSource {
 public:
  SyntheticData(int vocab, int batch, int seq_len, uint64_t seed)
      : DataSource(batch, seq_len), vocab_(vocab), seed_(seed), rng_(seed, kStreamData) {}
  std::string describe() const override {
    return "synthetic: " + std::to_string(kSyntheticSequences) + " fixed sequences of random " +
           "tokens in [1, " + std::to_string(vocab_) + "), seed " + std::to_string(seed_);
  }
  std::string identity() const override {
    return "synthetic seed=" + std::to_string(seed_) + " vocab=" + std::to_string(vocab_) +
           " seq_len=" + std::to_string(T_);
  }

 protected:
  int64_t train_windows() const override { return kSyntheticSequences; }
  void window(bool, int64_t w, int32_t* out) const override {
    for (int p = 0; p <= T_; ++p)
      out[p] = 1 + int32_t(rng_.below(uint64_t(w) * (T_ + 1) + p, uint32_t(vocab_ - 1)));
  }

 private:
  int vocab_;
  uint64_t seed_;
  CounterRng rng_;
};

class TextData final : public DataSource {
 public:
  TextData(std::string path, std::string bytes, int batch, int seq_len)
      : DataSource(batch, seq_len), path_(std::move(path)), bytes_(std::move(bytes)) {
    split_ = bytes_.size() * 9 / 10;
  }
  std::string describe() const override {
    return "text file " + path_ + ": " + std::to_string(bytes_.size()) + " bytes as tokens, " +
           std::to_string(split_) + " to train (" + std::to_string(train_windows()) +
           " windows), " + std::to_string(bytes_.size() - split_) + " to validate";
  }
  std::string identity() const override {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the contents
    for (char c : bytes_) h = (h ^ uint8_t(c)) * 0x100000001b3ull;
    return "text bytes=" + std::to_string(bytes_.size()) + " fnv1a=" + std::to_string(h) +
           " seq_len=" + std::to_string(T_);
  }

 protected:
  int64_t train_windows() const override { return int64_t(split_ - 1) / T_; }
  int64_t all_validation_windows() const override { return int64_t(bytes_.size() - split_ - 1) / T_; }
  void window(bool validation, int64_t w, int32_t* out) const override {
    const auto* base = reinterpret_cast<const uint8_t*>(bytes_.data()) + (validation ? split_ : 0) + size_t(w) * T_;
    for (int p = 0; p <= T_; ++p) out[p] = base[p];
  }

 private:
  std::string path_;
  std::string bytes_;  // the file's bytes are the tokens
  size_t split_;
};

class TokenData final : public DataSource {
 public:
  using Files = std::vector<std::unique_ptr<TokenFile>>;
  TokenData(Files train, Files val, int batch, int seq_len) : DataSource(batch, seq_len) {
    files_ = std::move(train);
    for (auto& f : files_) add(train_segments_, f.get(), 0, f->size());
    if (val.empty()) {  // the last 10% of the training tokens, taken from the end
      int64_t total = 0;
      for (const Segment& g : train_segments_) total += g.end - g.begin;
      int64_t left = total / 10;
      std::vector<Segment> taken;
      while (left > 0 && !train_segments_.empty()) {
        Segment& g = train_segments_.back();
        const int64_t n = std::min(left, g.end - g.begin);
        taken.insert(taken.begin(), Segment{g.file, g.end - n, g.end, 0});
        g.end -= n, left -= n;
        if (g.end == g.begin) train_segments_.pop_back();
      }
      for (const Segment& g : taken) add(val_segments_, g.file, g.begin, g.end);
      val_from_train_ = true;
    } else {
      for (auto& f : val) add(val_segments_, f.get(), 0, f->size());
      for (auto& f : val) files_.push_back(std::move(f));
    }
    train_windows_ = count(train_segments_);
    val_windows_ = count(val_segments_);
  }
  std::string describe() const override {
    int64_t train = 0, val = 0;
    for (const Segment& g : train_segments_) train += g.end - g.begin;
    for (const Segment& g : val_segments_) val += g.end - g.begin;
    return "token files: " + std::to_string(files_.size()) + " (" + files_.front()->path() + (files_.size() > 1 ? ", ..." : "") +
           "), " + std::to_string(train) + " tokens to train (" + std::to_string(train_windows_) + " windows), " +
           std::to_string(val) + " to validate" + (val_from_train_ ? " (the last 10%)" : "");
  }
  // By content, not by path: the same shards spelled another way (absolute, ./, a copy) are the
  // same data, and a shard rewritten in the middle is other data.
  std::string identity() const override {
    std::string id = "tokens seq_len=" + std::to_string(T_);
    for (const auto& f : files_) id += " " + std::to_string(f->size()) + ":" + std::to_string(f->fingerprint());
    return id;
  }
  int64_t windows() const { return train_windows_; }
  int64_t validation_window_count() const { return val_windows_; }

 protected:
  int64_t train_windows() const override { return train_windows_; }
  int64_t all_validation_windows() const override { return val_windows_; }
  void window(bool validation, int64_t w, int32_t* out) const override {
    const std::vector<Segment>& segs = validation ? val_segments_ : train_segments_;
    const auto it = std::upper_bound(segs.begin(), segs.end(), w,
                                     [](int64_t x, const Segment& g) { return x < g.first_window; });
    const Segment& g = *(it - 1);
    const int64_t start = g.begin + (w - g.first_window) * T_;
    g.file->read(start, T_ + 1, out);
  }

 private:
  struct Segment {
    const TokenFile* file;
    int64_t begin, end;    // tokens [begin, end) of the file
    int64_t first_window;  // the split's index of its first window
  };
  void add(std::vector<Segment>& to, const TokenFile* f, int64_t begin, int64_t end) {
    to.push_back({f, begin, end, 0});
  }
  int64_t count(std::vector<Segment>& segs) const {  // numbers the windows; drops segments too short for one
    int64_t n = 0;
    std::vector<Segment> kept;
    for (Segment g : segs) {
      const int64_t w = (g.end - g.begin - 1) / T_;
      if (w <= 0) continue;
      g.first_window = n;
      n += w;
      kept.push_back(g);
    }
    segs = kept;
    return n;
  }

  Files files_;
  std::vector<Segment> train_segments_, val_segments_;
  int64_t train_windows_ = 0, val_windows_ = 0;
  bool val_from_train_ = false;
};

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A glob pattern's matches, sorted; a plain path as it is (a file named with * ? [ ] too).
std::vector<std::string> expand(const std::string& spec) {
  if (spec.find_first_of("*?[") == std::string::npos || is_regular_file(spec)) return {spec};
  glob_t g{};
  const int rc = ::glob(spec.c_str(), 0, nullptr, &g);
  std::vector<std::string> paths(g.gl_pathv, g.gl_pathv + (rc == 0 ? g.gl_pathc : 0));
  ::globfree(&g);
  if (paths.empty()) usage_fail("--data: no file matches '" + spec + "'");
  std::sort(paths.begin(), paths.end());
  return paths;
}

std::unique_ptr<DataSource> make_token_data(const std::vector<std::string>& paths, int vocab_size, int batch,
                                            int seq_len) {
  TokenData::Files train, val;
  for (const std::string& p : paths) {
    const std::string name = p.substr(p.find_last_of('/') == std::string::npos ? 0 : p.find_last_of('/') + 1);
    (name.find("val") != std::string::npos ? val : train).push_back(std::make_unique<TokenFile>(p, vocab_size, "--data"));
  }
  if (train.empty()) usage_fail("--data: every file it names has \"val\" in its name: none to train on");
  auto data = std::make_unique<TokenData>(std::move(train), std::move(val), batch, seq_len);
  if (data->windows() == 0 || data->validation_window_count() == 0)
    usage_fail("--data: too few tokens for --seq-len " + std::to_string(seq_len) +
               ": training and validation each need a window of seq-len + 1 tokens in one file (" +
               data->describe() + ")");
  return data;
}

}  // namespace

std::vector<std::string> data_files(const std::string& spec) {
  return spec == "synthetic" ? std::vector<std::string>{} : expand(spec);
}

bool names_token_files(const std::string& spec) {
  if (spec == "synthetic") return false;
  const std::vector<std::string> paths = expand(spec);
  return paths.size() > 1 || is_token_file(paths.front());
}

std::unique_ptr<DataSource> make_data_source(const std::string& spec, int vocab_size, int batch,
                                             int seq_len, uint64_t seed) {
  if (spec == "synthetic") return std::make_unique<SyntheticData>(vocab_size, batch, seq_len, seed);
  const std::vector<std::string> paths = expand(spec);
  for (const std::string& p : paths)
    if (!is_regular_file(p)) usage_fail("--data: '" + p + "' is not a regular file (or does not exist)");
  if (paths.size() > 1 || is_token_file(paths.front())) return make_token_data(paths, vocab_size, batch, seq_len);

  const std::string path = paths.front();  // a pattern's one match, or the file itself
  std::error_code ec;
  if (const uintmax_t size = std::filesystem::file_size(path, ec); !ec && size > kMaxTextBytes)
    usage_fail("--data: '" + path + "' holds " + std::to_string(size >> 20) + " MiB of text; a text file is read whole " +
               "into memory (at most " + std::to_string(kMaxTextBytes >> 20) + " MiB): convert it once, tiny_llama " +
               "tokenize '" + path + "' --tokenizer bytes --out DIR, and train on --data 'DIR/*.bin', read as it goes");
  std::string bytes = read_input_file(path, "--data", kMaxTextBytes);
  if (bytes.empty()) usage_fail("--data: '" + path + "' is empty");
  // Text has no NUL byte; nanoGPT's prepare.py writes its uint16 tokens as a headerless .bin,
  // which read as text would train on the bytes of the numbers.
  const bool nul = bytes.find('\0') != std::string::npos;
  if (nul || std::filesystem::path(path).extension() == ".bin")
    usage_fail("--data: '" + path + "' is neither text (it " + (nul ? "holds NUL bytes" : "is a .bin") +
               ") nor a token file (no header with magic 20240520 or 20240801): a headerless .bin of uint16 tokens (nanoGPT's) "
               "is read once given llm.c's 1024-byte header (README, Data)");

  // Each split needs one window of T+1 bytes: the 10% validation part sets the minimum.
  const size_t need = size_t(seq_len + 1) * 10 + 10;
  const size_t split = bytes.size() * 9 / 10;
  if (split < size_t(seq_len) + 1 || bytes.size() - split < size_t(seq_len) + 1)
    usage_fail("--data: '" + path + "' has " + std::to_string(bytes.size()) +
               " bytes, too short for --seq-len " + std::to_string(seq_len) + " (needs about " +
               std::to_string(need) + ": each of the 90/10 splits must hold seq-len + 1 bytes)");
  if (vocab_size != kTextVocab)
    usage_fail("--vocab-size: a text file's tokens are its bytes, so the vocabulary must be 256 "
               "(got " + std::to_string(vocab_size) + ")");
  return std::make_unique<TextData>(path, std::move(bytes), batch, seq_len);
}

}  // namespace tt
